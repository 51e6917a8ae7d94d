package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dshrun/dsh/host"
	"github.com/dshrun/dsh/host/hostlog"
)

// Bodies are small: a composition file is the largest.
const maxBody = 8 << 20

// How long an action may take before the API gives up on it.
const actionTimeout = 2 * time.Minute

// How many log lines GET /console/api/logs gives at most.
const maxLogLines = 1000

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.page)
	m.HandleFunc("GET /console/{$}", c.page)
	m.HandleFunc("GET /console/login", c.login)
	m.HandleFunc("GET /console/{file}", c.asset)
	m.HandleFunc("GET /favicon.ico", c.favicon)

	api := func(pattern string, f func(http.ResponseWriter, *http.Request, caller)) {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			who, ok := c.who(r, true)
			if !ok {
				writeError(w, http.StatusUnauthorized, "log in first: open the login URL dsh serve printed, or run dsh console for a fresh one")
				return
			}
			if r.Method != http.MethodGet && r.Method != http.MethodHead && !who.bearer && !equal(r.Header.Get("X-Dsh-Csrf"), who.csrf) {
				writeError(w, http.StatusForbidden, "missing or wrong X-Dsh-Csrf header (GET /console/api/session gives it)")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				f(w, r, who)
				return
			}
			// Every action is in the log, with who asked and how it
			// ended: the console acts on the host as its user does.
			sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			f(sw, r, who)
			if r.Pattern == inputPattern && sw.code < 400 {
				// Typing comes in a batch a keystroke or so: the attach
				// that allowed it is the action, and its refusals are.
				return
			}
			c.log.Info("console action", "action", r.Method+" "+r.URL.Path, "by", who.kind(), "status", sw.code)
		})
	}
	api("GET /console/api/session", c.session)
	api("GET /console/api/graph", c.graph)
	api("POST /console/api/entries/{id}/reload", c.reload)
	api("GET /console/api/composition", c.composition)
	api("POST /console/api/composition/check", c.check)
	api("POST /console/api/composition/apply", c.apply)
	api("GET /console/api/agents", c.agents)
	api("POST /console/api/calls/{id}/cancel", c.cancelCall)
	api("POST /console/api/jobs/{owner}/{id}/kill", c.killJob)
	api("GET /console/api/jobs/{owner}/{id}/output", c.jobOutput)
	api("GET /console/api/terminals/{owner}/{id}/stream", c.terminalStream)
	api("POST /console/api/terminals/{owner}/{id}/attach", c.attach)
	api(inputPattern, c.input)
	api("GET /console/api/approvals", c.approvals)
	api("POST /console/api/approvals/{id}", c.answer)
	api("GET /console/api/logs", c.logs)
	api("GET /console/api/events", c.events)
	m.HandleFunc("/console/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such API: %s %s", r.Method, r.URL.Path))
	})
	c.mux = m
}

// readJSON decodes the request's body into v, or answers 400.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "unreadable JSON body: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "unreadable JSON body: more than one value")
		return false
	}
	return true
}

func actionContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), actionTimeout)
}

func (c *Console) session(w http.ResponseWriter, r *http.Request, who caller) {
	writeJSON(w, http.StatusOK, map[string]string{"csrf": who.csrf, "version": c.src.Version(), "file": c.src.File()})
}

type graphJSON struct {
	File    string           `json:"file"`
	Entries []host.EntryView `json:"entries"`
}

func (c *Console) graphView() graphJSON {
	g := c.src.Graph()
	if g == nil {
		g = []host.EntryView{}
	}
	return graphJSON{File: c.src.File(), Entries: g}
}

func (c *Console) graph(w http.ResponseWriter, r *http.Request, _ caller) {
	writeJSON(w, http.StatusOK, c.graphView())
}

func (c *Console) reload(w http.ResponseWriter, r *http.Request, _ caller) {
	ctx, cancel := actionContext(r)
	defer cancel()
	if err := c.src.Reload(ctx, r.PathValue("id")); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (c *Console) composition(w http.ResponseWriter, r *http.Request, _ caller) {
	file, text, err := c.src.CompositionText()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"file": file, "text": string(text)})
}

type textBody struct {
	Text string `json:"text"`
}

func (c *Console) check(w http.ResponseWriter, r *http.Request, _ caller) {
	var b textBody
	if !readJSON(w, r, &b) {
		return
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	writeJSON(w, http.StatusOK, map[string][]Problem{"problems": orEmptyProblems(c.src.CheckComposition(ctx, []byte(b.Text)))})
}

func (c *Console) apply(w http.ResponseWriter, r *http.Request, _ caller) {
	var b textBody
	if !readJSON(w, r, &b) {
		return
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	problems, err := c.src.ApplyComposition(ctx, []byte(b.Text))
	out := struct {
		Applied  bool      `json:"applied"`
		Problems []Problem `json:"problems"`
		Error    string    `json:"error"`
	}{Problems: orEmptyProblems(problems)}
	if err != nil {
		out.Error = err.Error()
	}
	out.Applied = err == nil && len(problems) == 0
	writeJSON(w, http.StatusOK, out)
}

type agentsJSON struct {
	Owners []Owner `json:"owners"`
}

func (c *Console) agentsView() agentsJSON {
	o := c.src.Agents()
	now := c.opts.now()
	for i := range o {
		if o[i].Calls == nil {
			o[i].Calls = []CallView{}
		}
		for j := range o[i].Calls {
			o[i].Calls[j].ElapsedMs = now.Sub(o[i].Calls[j].StartedAt).Milliseconds()
		}
		if o[i].Jobs == nil {
			o[i].Jobs = []JobView{}
		}
		if o[i].Terminals == nil {
			o[i].Terminals = []TerminalView{}
		}
	}
	if o == nil {
		o = []Owner{}
	}
	return agentsJSON{Owners: o}
}

func (c *Console) agents(w http.ResponseWriter, r *http.Request, _ caller) {
	writeJSON(w, http.StatusOK, c.agentsView())
}

func (c *Console) cancelCall(w http.ResponseWriter, r *http.Request, _ caller) {
	id := r.PathValue("id")
	if !c.src.CancelCall(id) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no call %q in flight", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (c *Console) killJob(w http.ResponseWriter, r *http.Request, _ caller) {
	ctx, cancel := actionContext(r)
	defer cancel()
	if err := c.src.KillJob(ctx, r.PathValue("owner"), r.PathValue("id")); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (c *Console) attach(w http.ResponseWriter, r *http.Request, who caller) {
	sess := who.session
	if who.bearer {
		sess = "bearer"
	}
	writeJSON(w, http.StatusOK, map[string]string{"attach": c.auth.newAttach(sess, r.PathValue("owner"), r.PathValue("id"))})
}

// inputPattern is the route of typing into an attached terminal.
const inputPattern = "POST /console/api/terminals/{owner}/{id}/input"

func (c *Console) input(w http.ResponseWriter, r *http.Request, who caller) {
	var b struct {
		Attach string `json:"attach"`
		Data   string `json:"data"`
	}
	if !readJSON(w, r, &b) {
		return
	}
	sess := who.session
	if who.bearer {
		sess = "bearer"
	}
	owner, id := r.PathValue("owner"), r.PathValue("id")
	if !c.auth.attached(b.Attach, sess, owner, id) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("not attached to terminal %s of %s: attach first (POST .../attach)", id, owner))
		return
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	if err := c.src.WriteTerminal(ctx, owner, id, []byte(b.Data)); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

type approvalsJSON struct {
	Pending []host.Question `json:"pending"` // their JSON is the API's
}

func (c *Console) approvalsView() approvalsJSON {
	p := c.src.Approvals()
	if p == nil {
		p = []host.Question{}
	}
	return approvalsJSON{Pending: p}
}

func (c *Console) approvals(w http.ResponseWriter, r *http.Request, _ caller) {
	writeJSON(w, http.StatusOK, c.approvalsView())
}

func (c *Console) answer(w http.ResponseWriter, r *http.Request, _ caller) {
	var b struct {
		Decision string `json:"decision"`
	}
	if !readJSON(w, r, &b) {
		return
	}
	if b.Decision != "approve" && b.Decision != "deny" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("decision %q: want \"approve\" or \"deny\"", b.Decision))
		return
	}
	if err := c.src.AnswerApproval(r.PathValue("id"), b.Decision == "approve"); err != nil {
		actionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

var levels = map[string]bool{"": true, "trace": true, "debug": true, "info": true, "warn": true, "error": true}

func (c *Console) logs(w http.ResponseWriter, r *http.Request, _ caller) {
	q := r.URL.Query()
	level := strings.ToLower(q.Get("level"))
	if !levels[level] {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("level %q: want trace, debug, info, warn or error", q.Get("level")))
		return
	}
	lines := c.src.Logs(q.Get("entry"), level, maxLogLines)
	if lines == nil {
		lines = []hostlog.Line{}
	}
	writeJSON(w, http.StatusOK, map[string][]hostlog.Line{"lines": lines})
}

func orEmptyProblems(v []Problem) []Problem {
	if v == nil {
		return []Problem{}
	}
	return v
}

// statusWriter remembers the status an action was answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
