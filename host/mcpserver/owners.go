package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshrun/dsh/internal/randid"
)

// Owners. Everything a client starts (jobs, terminals, persistent
// shells, spill files) belongs to an owner, an opaque random id, never
// the Mcp-Session-Id: spill folders and resource URIs carry the owner,
// and a command can list them, so were it the session id, a command could
// call the host as that session.
//
//   - A connection (an MCP session over stdio or stateful HTTP) gets an
//     owner of its own when it initializes. When it ends, its owner waits
//     ReleaseGrace and is then released: its jobs and processes are
//     killed, its terminals and persistent shells closed, its spill files
//     removed.
//   - With Resumable (clients.owners: resumable), the owner waits
//     ResumeWithin instead, and the initialize result carries a resume
//     handle (_meta "dev.dsh/resume"). A client that opens a new session
//     with that handle in the Dsh-Resume header, under the same bearer
//     token's principal, gets the same owner back, with all it still
//     holds. A handle is unguessable, bound to its principal, and ends
//     with its owner.
//   - A client on the stateless protocol (2026-07-28 and later) over HTTP
//     has no connection: each request is a session of its own. Its owner
//     is its bearer token's principal, one per principal for the host's
//     life, and its job and terminal ids are unguessable handles, so an id
//     is what ties a call to the next; another principal's id is answered
//     like an unknown one. Over stdio the connection is the owner as
//     before, with short ids: nothing but that connection can name them.

// ResumeHeader is the HTTP header in which a client presents the resume
// handle of the owner it wants back.
const ResumeHeader = "Dsh-Resume"

// Keys of the _meta of the initialize result that say what became of an
// owner.
const (
	metaResume  = "dev.dsh/resume"  // the owner's resume handle
	metaResumed = "dev.dsh/resumed" // true: the presented handle's owner was taken back; false: it had ended
)

// servePrincipal is the principal of the token dsh serve prints; the
// composition's tokens are "token:<name>".
const servePrincipal = "serve"

// ownerRec is one owner the server made.
type ownerRec struct {
	id        string
	principal string // of the bearer token that made it; "" without one
	since     time.Time
	client    string      // the client's name, for the console
	live      int         // sessions attached
	resume    string      // its resume handle; "" unless Resumable
	release   *time.Timer // set while no session is attached
	stateless bool        // a principal's: never released before the host stops
}

// ownerOf is the owner of the client behind req, made on first use.
func (s *Server) ownerOf(req mcp.Request) string {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return s.owner(ss, req.GetExtra())
}

// owner is the owner of session ss (the request's extra says which bearer
// token's principal it is and what resume handle it presents).
func (s *Server) owner(ss *mcp.ServerSession, extra *mcp.RequestExtra) string {
	principal := principalOf(extra)
	if ss != nil && ss.ID() == "" && extra != nil && extra.Header != nil {
		return s.principalOwner(principal)
	}
	s.omu.Lock()
	defer s.omu.Unlock()
	if r, ok := s.owners[ss]; ok {
		return r.id
	}
	var rec *ownerRec
	presented := ""
	if s.opts.Resumable && extra != nil && extra.Header != nil {
		presented = extra.Header.Get(ResumeHeader)
	}
	if presented != "" {
		if r := s.byResume[presented]; r != nil && r.principal == principal {
			rec = r
			if rec.release != nil {
				rec.release.Stop()
				rec.release = nil
			}
			s.log.Info("a client came back to its owner", "owner", rec.id, "principal", principal)
		} else {
			// Ended (released, or the host restarted), another principal's,
			// or never made: the client starts afresh, and is told so.
			s.log.Info("a resume handle named no owner of this principal; the client starts afresh", "principal", principal)
		}
	}
	if rec == nil {
		rec = &ownerRec{id: newOwner(), principal: principal, since: time.Now()}
		if s.opts.Resumable {
			rec.resume = randid.New()
			s.byResume[rec.resume] = rec
		}
		s.all[rec.id] = rec
	}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			rec.client = clientName(p.ClientInfo)
		}
	}
	rec.live++
	s.owners[ss] = rec
	s.agents.Fire()
	if ss == nil {
		return rec.id // no session to watch: only tests call without one
	}
	s.log.Debug("session started", "owner", rec.id, "principal", principal)
	go s.detach(ss, rec)
	return rec.id
}

// detach waits for ss to end, then lets its owner go after the grace
// (ResumeWithin for resumable owners) unless another session holds it.
func (s *Server) detach(ss *mcp.ServerSession, rec *ownerRec) {
	_ = ss.Wait()
	s.omu.Lock()
	defer s.omu.Unlock()
	delete(s.ready, ss)
	delete(s.owners, ss)
	rec.live--
	if rec.live > 0 {
		return
	}
	wait := s.opts.ReleaseGrace
	if rec.resume != "" && s.opts.ResumeWithin > wait {
		wait = s.opts.ResumeWithin
	}
	s.log.Debug("session ended; its owner waits", "owner", rec.id, "for", wait)
	rec.release = time.AfterFunc(wait, func() { s.release(rec) })
}

// release ends an owner no session came back to.
func (s *Server) release(rec *ownerRec) {
	s.omu.Lock()
	if rec.live > 0 || s.all[rec.id] != rec {
		s.omu.Unlock()
		return // taken back meanwhile
	}
	delete(s.all, rec.id)
	if rec.resume != "" {
		delete(s.byResume, rec.resume)
	}
	s.omu.Unlock()
	s.endTasks(rec.id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.h.ReleaseOwner(ctx, rec.id); err != nil {
		s.log.Warn("release of an ended session", "owner", rec.id, "error", err)
	}
	s.agents.Fire()
	s.forgetQuestions(rec.id)
	s.log.Debug("session ended; its jobs are gone", "owner", rec.id)
}

// principalOwner is the owner of a principal's stateless requests.
func (s *Server) principalOwner(principal string) string {
	s.omu.Lock()
	defer s.omu.Unlock()
	if r := s.byPrincipal[principal]; r != nil {
		return r.id
	}
	rec := &ownerRec{id: newOwner(), principal: principal, since: time.Now(), stateless: true, client: "stateless clients of " + principalName(principal)}
	s.h.UseHandles(rec.id)
	s.byPrincipal[principal] = rec
	s.all[rec.id] = rec
	s.agents.Fire()
	s.log.Info("stateless clients got an owner", "owner", rec.id, "principal", principal)
	return rec.id
}

// principalOf is the principal of the request's bearer token ("" without
// one: stdio, or HTTP without authentication).
func principalOf(extra *mcp.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	return extra.TokenInfo.UserID
}

func principalName(p string) string {
	if p == "" {
		return "the unauthenticated endpoint"
	}
	return p
}

// initialized starts the session's ownership (and its release watch) as
// soon as the client is ready, so even a session that calls nothing is
// released.
func (s *Server) initialized(_ context.Context, req *mcp.InitializedRequest) {
	s.ownerOf(req)
}

// announceOwner makes the owner of an initializing session (it may be one
// taken back with a resume handle) and tells the client its resume handle
// in the initialize result.
func (s *Server) announceOwner(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		ir, ok := res.(*mcp.InitializeResult)
		if method != "initialize" || err != nil || !ok {
			return res, err
		}
		presented := ""
		if extra := req.GetExtra(); extra != nil && extra.Header != nil {
			presented = extra.Header.Get(ResumeHeader)
		}
		handle := ""
		if s.opts.Resumable {
			id := s.ownerOf(req)
			s.omu.Lock()
			if rec := s.all[id]; rec != nil {
				handle = rec.resume
			}
			s.omu.Unlock()
		}
		if handle == "" && presented == "" {
			return ir, nil
		}
		if ir.Meta == nil {
			ir.Meta = mcp.Meta{}
		}
		if handle != "" {
			ir.Meta[metaResume] = handle
		}
		if presented != "" {
			// A fresh owner has a handle of its own: the presented one is
			// its only when the owner was taken back (and never where
			// owners end with their connection).
			ir.Meta[metaResumed] = handle == presented
		}
		return ir, nil
	}
}

// newOwner makes an owner id: 128 random bits, nothing derived from the
// session.
func newOwner() string { return "mcp-" + randid.New() }
