"""A ctx.shell executor for dsh, written in Python.

It speaks go-plugin's gRPC protocol (docs/architecture.md, "A plugin in
another language"): the handshake line, AutoMTLS against the host's
certificate, the health, broker and controller services, and serves
dsh.plugin.v1.Lifecycle and dsh.shell.v1.Shell.

A foreground command runs here, as `bash -c` in a process group of its own,
which is what a timeout or an abort ends. A background command is started
through ctx.subprocess, on the host's connection (the broker): ctx.jobs
adopts only processes of the host's table, and reads, kills and waits for
them through this executor.
"""

import base64
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

import goplugin_pb2  # noqa: E402
from core.lifecycle.pluginv1 import plugin_pb2  # noqa: E402
from core.output.outputv1 import output_pb2  # noqa: E402
from core.subprocess.subprocessv1 import subprocess_pb2  # noqa: E402
from plugins.shell.shellv1 import shell_pb2  # noqa: E402

COOKIE_KEY, COOKIE_VALUE = "DSH_PLUGIN_COOKIE", "dsh-plugin-5f0c7e"
PROTOCOL_VERSION = "1"

# ctx.shell's defaults (plugins/shell DefaultLimits).
DEFAULTS = {
    "timeoutMs": 120000,
    "maxTimeoutMs": 600000,
    "maxOutputBytes": 64000,
    "graceMs": 3000,
}

CONFIG_SCHEMA = json.dumps({
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "cwd": {"type": "string", "description": "default working directory"},
        "timeoutMs": {"type": "integer", "minimum": 1, "description": "default foreground timeout (120000)"},
        "maxTimeoutMs": {"type": "integer", "minimum": 1, "description": "cap on a per-call timeout (600000)"},
        "maxOutputBytes": {"type": "integer", "minimum": 1, "description": "output held in memory per stream (64000)"},
        "graceMs": {"type": "integer", "minimum": 0, "description": "SIGTERM to SIGKILL grace (3000)"},
    },
})

# The first layer of every command's environment: common tools neither page
# nor colour nor prompt (the caller's env and the DSH_* facts override it).
ENV_OVERRIDES = {
    "NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
    "MANPAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "DEBIAN_FRONTEND": "noninteractive",
}

SHELL_METHODS = ["Resolve", "Run", "Start", "Exec", "ReadOutput", "Kill", "Wait", "Limits"]


class Refused(Exception):
    """A request the executor refuses, with the status and the sentence the caller reads."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def parse_config(raw):
    cfg = json.loads(raw) if raw else {}
    if not isinstance(cfg, dict):
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "config: not an object")
    out = dict(DEFAULTS)
    for k, v in cfg.items():
        if v not in (None, 0, ""):
            out[k] = v
    out["cwd"] = os.path.abspath(os.path.expanduser(cfg.get("cwd") or os.getcwd()))
    if out["timeoutMs"] > out["maxTimeoutMs"]:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                      "config: timeoutMs %d is above maxTimeoutMs %d" % (out["timeoutMs"], out["maxTimeoutMs"]))
    return out


class Stream:
    """One output stream: the tail held in memory and what was dropped of it."""

    def __init__(self, limit):
        self.limit = limit
        self.data = bytearray()
        self.total = 0
        self.dropped = 0
        self.dropped_lines = 0
        self.lock = threading.Lock()

    def add(self, chunk):
        with self.lock:
            self.total += len(chunk)
            self.data += chunk
            over = len(self.data) - self.limit
            if over > 0:
                self.dropped += over
                self.dropped_lines += self.data.count(b"\n", 0, over)
                del self.data[:over]

    def collected(self):
        with self.lock:
            return output_pb2.Collected(data=bytes(self.data), total=self.total,
                                        truncated=self.dropped > 0, dropped=self.dropped,
                                        dropped_lines=self.dropped_lines)

    def pump(self, pipe):
        while True:
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            self.add(chunk)
        pipe.close()


class Process:
    """A foreground command in its own process group, and its collected output."""

    def __init__(self, spec):
        env = dict(os.environ)
        env.update(command_env(spec))
        check_workdir(spec)
        self.proc = subprocess.Popen(
            ["bash", "-c", spec.command], cwd=spec.workdir, env=env,
            stdin=subprocess.PIPE if spec.has_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)  # its own group: a kill reaches the whole tree
        self.grace = spec.grace_ms / 1000.0
        self.stdout = Stream(spec.max_output_bytes)
        self.stderr = Stream(spec.max_output_bytes)
        self.readers = [threading.Thread(target=s.pump, args=(p,), daemon=True)
                        for s, p in ((self.stdout, self.proc.stdout), (self.stderr, self.proc.stderr))]
        for r in self.readers:
            r.start()
        if spec.has_stdin:
            threading.Thread(target=self._feed, args=(spec.stdin,), daemon=True).start()

    def _feed(self, data):
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except OSError:
            pass  # the command did not read all of it

    def signal_group(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def terminate(self):
        """SIGTERM to the tree, then SIGKILL once the grace is over."""
        self.signal_group(signal.SIGTERM)
        try:
            self.proc.wait(self.grace)
        except subprocess.TimeoutExpired:
            pass
        self.signal_group(signal.SIGKILL)

    def finish(self):
        """After the command ended: what it left running in its group dies with it."""
        self.signal_group(signal.SIGKILL)
        for r in self.readers:
            r.join()

    def exit_facts(self):
        rc = self.proc.returncode
        if rc is None:
            return None, ""
        if rc < 0:
            return None, signal.Signals(-rc).name
        return rc, ""


def command_env(spec):
    """The command's own layers: the overrides, the caller's env, then the DSH_* facts."""
    env = dict(ENV_OVERRIDES)
    env.update(spec.env)
    env.update(spec.dsh_env)
    return env


def check_workdir(spec):
    if not os.path.isdir(spec.workdir):
        raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "The working directory %s does not exist." % spec.workdir)


STATUS = {subprocess_pb2.STATUS_RUNNING: "running", subprocess_pb2.STATUS_COMPLETED: "completed",
          subprocess_pb2.STATUS_KILLED: "killed"}


def state_of(status, has_code, code, sig, limits):
    st = shell_pb2.ProcessState(status=STATUS.get(status, "running"), signal=sig, limits=limits)
    if has_code:
        st.exit_code = code
    return st


def moved_out(c):
    """A stream's data, and the stream's facts without it (ProcessRead carries the data itself)."""
    data = c.data
    facts = output_pb2.Collected()
    facts.CopyFrom(c)
    facts.data = b""
    return data, facts


class Broker:
    """The host's announcements on go-plugin's broker stream: where each broker id listens."""

    def __init__(self):
        self.conns = {}
        self.cond = threading.Condition()

    def stream(self, requests, ctx):
        for info in requests:
            with self.cond:
                self.conns[info.service_id] = info
                self.cond.notify_all()
        return
        yield  # a generator: the stream's replies (none)

    def address(self, service_id, timeout=10):
        with self.cond:
            if not self.cond.wait_for(lambda: service_id in self.conns, timeout):
                raise Refused(grpc.StatusCode.UNAVAILABLE,
                              "The host did not announce its connection %d." % service_id)
            return self.conns[service_id]


def host_call(channel, service, method, req_type, resp_type):
    return channel.unary_unary("/%s/%s" % (service, method), request_serializer=req_type.SerializeToString,
                               response_deserializer=resp_type.FromString)


class Executor:
    def __init__(self, broker, tls):
        self.cfg = parse_config(b"")
        self.broker = broker
        self.tls = tls  # (key, certificate, the host's certificate), PEM
        self.sub = None  # ctx.subprocess's methods, once Apply dialled the host
        self.running = set()  # foreground commands, killed when the process ends
        self.lock = threading.Lock()

    # Lifecycle

    def Describe(self, req, ctx):
        return plugin_pb2.Description(
            name="python-executor", version="0.1.0",
            summary="ctx.shell: each command a fresh bash -c, run by a Python process",
            provides=[plugin_pb2.Provide(
                key="shell", grpc_services=["dsh.shell.v1.Shell"],
                methods=[plugin_pb2.Method(name="/dsh.shell.v1.Shell/" + m) for m in SHELL_METHODS])],
            inject=[plugin_pb2.Inject(key="subprocess")],
            config_schema=CONFIG_SCHEMA, settings_namespace="shell")

    def Apply(self, req, ctx):
        self.cfg = parse_config(req.config_json)
        info = self.broker.address(req.host_broker_id)
        key, cert, host_cert = self.tls
        creds = grpc.ssl_channel_credentials(root_certificates=host_cert, private_key=key, certificate_chain=cert)
        target = ("unix:" if info.network == "unix" else "") + info.address
        channel = grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", "localhost")])
        svc, m = "dsh.subprocess.v1.Subprocess", subprocess_pb2
        self.sub = {
            "Start": host_call(channel, svc, "Start", m.SpawnRequest, m.StartResponse),
            "Read": host_call(channel, svc, "Read", m.ProcessRef, m.ReadResponse),
            "Kill": host_call(channel, svc, "Kill", m.ProcessRef, m.KillResponse),
            "Wait": host_call(channel, svc, "Wait", m.ProcessRef, m.Result),
        }
        return plugin_pb2.ApplyResponse()

    def subprocess_call(self, method, req, ctx):
        """A call of ctx.subprocess for the tool call being served: dsh-key names the
        service, dsh-call is copied so that the host acts for the agent."""
        md = [("dsh-key", "subprocess")]
        call = dict(ctx.invocation_metadata()).get("dsh-call")
        if call:
            md.append(("dsh-call", call))
        fut = self.sub[method].future(req, metadata=md)
        ctx.add_callback(fut.cancel)  # a cancelled call cancels its own
        try:
            return fut.result()
        except grpc.RpcError as e:
            raise Refused(e.code(), e.details())
        except grpc.FutureCancelledError:
            raise Refused(grpc.StatusCode.CANCELLED, "The call was cancelled.")

    def Check(self, req, ctx):
        parse_config(req.config_json)
        return plugin_pb2.CheckResponse()

    def Health(self, req, ctx):
        return plugin_pb2.HealthResponse(ok=True)

    def Dispose(self, req, ctx):
        self.kill_all()
        return plugin_pb2.DisposeResponse()

    def Release(self, req, ctx):
        # Nothing to drop: background processes are the host's, kept per owner.
        return plugin_pb2.ReleaseResponse()

    def kill_all(self):
        with self.lock:
            running = list(self.running)
        for p in running:
            p.signal_group(signal.SIGKILL)

    # Shell

    def Resolve(self, req, ctx):
        if not req.command.strip():
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "There is no command to run: the command is empty.")
        c = self.cfg
        wd = os.path.expanduser(req.workdir) if req.workdir else c["cwd"]
        wd = os.path.normpath(os.path.join(c["cwd"], wd))
        timeout = req.timeout_ms if req.timeout_ms > 0 else c["timeoutMs"]
        max_out = req.max_output_bytes
        if max_out <= 0 or max_out > c["maxOutputBytes"]:
            max_out = c["maxOutputBytes"]
        owner = req.owner or dict(ctx.invocation_metadata()).get("dsh-caller", "")
        return shell_pb2.ExecSpec(
            command=req.command, workdir=wd, timeout_ms=min(timeout, c["maxTimeoutMs"]),
            max_output_bytes=max_out, grace_ms=c["graceMs"], stdin=req.stdin, has_stdin=req.has_stdin,
            env=req.env, dsh_env=req.dsh_env, owner=owner, sandbox_policy=req.sandbox_policy)

    def Run(self, spec, ctx):
        started = time.monotonic()
        p = Process(spec)
        with self.lock:
            self.running.add(p)
        deadline = started + spec.timeout_ms / 1000.0
        timed_out = aborted = False
        while p.proc.poll() is None:
            if not ctx.is_active():  # the caller cancelled: abort the command
                aborted = True
                p.terminate()
                break
            if time.monotonic() >= deadline:
                timed_out = True
                p.terminate()
                break
            try:
                p.proc.wait(0.05)
            except subprocess.TimeoutExpired:
                pass
        p.proc.wait()
        p.finish()
        with self.lock:
            self.running.discard(p)
        code, sig = p.exit_facts()
        res = shell_pb2.RunResult(
            signal=sig, timed_out=timed_out, aborted=aborted, timeout_ms=spec.timeout_ms,
            stdout=p.stdout.collected(), stderr=p.stderr.collected(),
            duration_ms=int((time.monotonic() - started) * 1000), workdir=spec.workdir)
        if code is not None:
            res.exit_code = code
        return res

    def Exec(self, req, ctx):
        return self.Run(self.Resolve(req, ctx), ctx)

    def Start(self, spec, ctx):
        check_workdir(spec)
        req = subprocess_pb2.SpawnRequest(
            argv=["bash", "-c", spec.command], dir=spec.workdir, env=command_env(spec),
            stdin=spec.stdin, has_stdin=spec.has_stdin, owner=spec.owner, grace_ms=spec.grace_ms,
            max_output_bytes=spec.max_output_bytes, max_spill_bytes=spec.max_spill_bytes,
            spill_after_bytes=spec.spill_after_bytes, max_processes=spec.max_processes,
            max_memory_bytes=spec.max_memory_bytes,
            settle_failure=True)  # a spawn failure settles as killed, with the error on stderr
        r = self.subprocess_call("Start", req, ctx)
        return shell_pb2.StartResponse(id=r.id, pid=r.pid)

    def ReadOutput(self, ref, ctx):
        r = self.subprocess_call("Read", subprocess_pb2.ProcessRef(id=ref.id), ctx)
        out, out_facts = moved_out(r.stdout)
        err, err_facts = moved_out(r.stderr)
        return shell_pb2.ProcessRead(
            stdout=out, stderr=err, lossy=r.lossy, stdout_spill_path=out_facts.spill_path,
            stderr_spill_path=err_facts.spill_path, stdout_facts=out_facts, stderr_facts=err_facts,
            state=state_of(r.status, r.HasField("exit_code"), r.exit_code, r.signal, r.limits))

    def Kill(self, ref, ctx):
        r = self.subprocess_call("Kill", subprocess_pb2.ProcessRef(id=ref.id), ctx)
        return shell_pb2.KillResponse(killed=r.killed)

    def Wait(self, ref, ctx):
        r = self.subprocess_call("Wait", subprocess_pb2.ProcessRef(id=ref.id), ctx)
        return state_of(r.status, r.HasField("exit_code"), r.exit_code, r.signal, r.limits)

    def Limits(self, req, ctx):
        c = self.cfg
        return shell_pb2.ExecLimits(workdir=c["cwd"], timeout_ms=c["timeoutMs"], max_timeout_ms=c["maxTimeoutMs"],
                                    grace_ms=c["graceMs"], max_output_bytes=c["maxOutputBytes"])


def unary(fn, req_type, resp_type):
    def call(req, ctx):
        try:
            return fn(req, ctx)
        except Refused as e:
            ctx.abort(e.code, str(e))
    return grpc.unary_unary_rpc_method_handler(call, request_deserializer=req_type.FromString,
                                               response_serializer=resp_type.SerializeToString)


def make_cert():
    """A one-time certificate, as go-plugin's AutoMTLS makes one: its own CA, named localhost."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=30))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_agreement=True,
                                         key_cert_sign=True, content_commitment=False, data_encipherment=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM), cert.public_bytes(serialization.Encoding.DER)


def leave(executor, sock_dir):
    """Ends the process: its foreground commands, its socket, itself."""
    executor.kill_all()
    shutil.rmtree(sock_dir, ignore_errors=True)
    os._exit(0)


def watch_host(pid, executor, sock_dir):
    """Exit when the host is gone."""
    while True:
        time.sleep(1)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            leave(executor, sock_dir)
        except PermissionError:
            pass


def main():
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.stderr.write("This is a dsh plugin: the dsh host starts it (name it in a composition).\n")
        sys.exit(1)
    if PROTOCOL_VERSION not in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", PROTOCOL_VERSION).split(","):
        sys.stderr.write("The host speaks none of this plugin's protocol versions (%s).\n" % PROTOCOL_VERSION)
        sys.exit(1)
    host_cert = os.environ.get("PLUGIN_CLIENT_CERT", "").encode()
    if not host_cert:
        sys.stderr.write("PLUGIN_CLIENT_CERT is not set: the host's certificate is needed for TLS.\n")
        sys.exit(1)

    key_pem, cert_pem, cert_der = make_cert()
    broker = Broker()
    ex = Executor(broker, (key_pem, cert_pem, host_cert))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))

    lifecycle = {
        "Describe": (ex.Describe, plugin_pb2.DescribeRequest, plugin_pb2.Description),
        "Apply": (ex.Apply, plugin_pb2.ApplyRequest, plugin_pb2.ApplyResponse),
        "Check": (ex.Check, plugin_pb2.CheckRequest, plugin_pb2.CheckResponse),
        "Health": (ex.Health, plugin_pb2.HealthRequest, plugin_pb2.HealthResponse),
        "Dispose": (ex.Dispose, plugin_pb2.DisposeRequest, plugin_pb2.DisposeResponse),
        "Release": (ex.Release, plugin_pb2.ReleaseRequest, plugin_pb2.ReleaseResponse),
    }
    shell = {
        "Resolve": (ex.Resolve, shell_pb2.ExecRequest, shell_pb2.ExecSpec),
        "Run": (ex.Run, shell_pb2.ExecSpec, shell_pb2.RunResult),
        "Exec": (ex.Exec, shell_pb2.ExecRequest, shell_pb2.RunResult),
        "Start": (ex.Start, shell_pb2.ExecSpec, shell_pb2.StartResponse),
        "ReadOutput": (ex.ReadOutput, shell_pb2.ProcessRef, shell_pb2.ProcessRead),
        "Kill": (ex.Kill, shell_pb2.ProcessRef, shell_pb2.KillResponse),
        "Wait": (ex.Wait, shell_pb2.ProcessRef, shell_pb2.ProcessState),
        "Limits": (ex.Limits, shell_pb2.LimitsRequest, shell_pb2.ExecLimits),
    }
    serving = goplugin_pb2.HealthCheckResponse(status=goplugin_pb2.HealthCheckResponse.SERVING)

    def shutdown(req, ctx):
        threading.Timer(0.1, leave, args=(ex, sock_dir)).start()  # once the reply is out
        return goplugin_pb2.Empty()

    server.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler("dsh.plugin.v1.Lifecycle",
                                             {k: unary(*v) for k, v in lifecycle.items()}),
        grpc.method_handlers_generic_handler("dsh.shell.v1.Shell", {k: unary(*v) for k, v in shell.items()}),
        grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
            "Check": unary(lambda r, c: serving, goplugin_pb2.HealthCheckRequest, goplugin_pb2.HealthCheckResponse)}),
        grpc.method_handlers_generic_handler("plugin.GRPCController", {
            "Shutdown": unary(shutdown, goplugin_pb2.Empty, goplugin_pb2.Empty)}),
        grpc.method_handlers_generic_handler("plugin.GRPCBroker", {
            "StartStream": grpc.stream_stream_rpc_method_handler(
                broker.stream, request_deserializer=goplugin_pb2.ConnInfo.FromString,
                response_serializer=goplugin_pb2.ConnInfo.SerializeToString)}),
    ])

    sock_dir = tempfile.mkdtemp(prefix="dsh-py-", dir=os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or None)
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=host_cert,
                                        require_client_auth=True)
    sock = os.path.join(sock_dir, "plugin.sock")
    server.add_secure_port("unix:" + sock, creds)
    server.start()

    host_pid = int(os.environ.get("DSH_HOST_PID", "0") or 0)
    if host_pid > 0:
        threading.Thread(target=watch_host, args=(host_pid, ex, sock_dir), daemon=True).start()

    cert_b64 = base64.b64encode(cert_der).decode().rstrip("=")
    sys.stdout.write("1|%s|unix|%s|grpc|%s\n" % (PROTOCOL_VERSION, sock, cert_b64))
    sys.stdout.flush()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
