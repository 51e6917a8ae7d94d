package consent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dshrun/dsh/core/approval"
)

// Asker asks the user behind one tool call (for an MCP session, the
// client's user, by elicitation). It returns the user's decision
// (DecidedBy approval.ByUser) or an error saying why the user could not be
// asked, in words for the model (no transport codes). ctx bounds the wait:
// its deadline is the section's askTimeout, and an answer that comes after
// it is an error wrapping context.DeadlineExceeded.
//
// The front end that makes a call gives its Asker with the call (a
// host.ToolCall); the host keeps it with the call's id, so a request is
// asked only of the user behind the call it serves, whatever the plugin
// says.
type Asker interface {
	Ask(ctx context.Context, owner string, req *approval.Request) (*approval.Decision, error)
}

// ErrAskedLater is an Asker's answer when the question cannot be put
// while the call runs (MCP 2026-07-28 and later): it goes back to the
// client with the call's result, the call is stopped, and the client
// repeats it with the user's answer. Until then it is a denial, so
// nothing past the question runs in this round.
var ErrAskedLater = errors.New("the question goes back to the client, which repeats the call with the user's answer")

// ask puts req to the user behind the call, failing closed: no call, no
// one to ask, an error, the end of the call or of the wait is a denial
// that says which.
func (s *Service) ask(ctx context.Context, call Call, served bool, req *approval.Request, why string) *approval.Decision {
	needs := "denied: this needs the user's approval (" + why + ")"
	deny := func(format string, args ...any) *approval.Decision {
		return &approval.Decision{Reason: needs + ", and " + fmt.Sprintf(format, args...), DecidedBy: approval.ByNone}
	}
	if !served {
		return deny("the request serves no tool call, so there is no user to ask")
	}
	a := call.Asker
	wait := s.Policy.AskTimeout()
	if s.Policy.asksConsole() {
		return s.askBoth(ctx, call, req, wait, deny)
	}
	if a == nil {
		return deny("the call comes from no MCP session whose user could be asked (a dsh call, or a call the host makes)")
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	d, err := a.Ask(actx, call.Owner, req)
	switch {
	case errors.Is(err, ErrAskedLater):
		return &approval.Decision{Reason: "denied for now: the user is being asked, and the call is repeated with the answer", DecidedBy: approval.ByNone}
	case err == nil && d != nil:
		return d
	case ctx.Err() != nil:
		return deny("the call ended before the user answered")
	case actx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return deny("the user did not answer within %v (approval.askTimeout)", wait)
	case err != nil:
		return deny("the user could not be asked: %v", err)
	}
	return deny("the user gave no answer")
}

// askBoth puts req on the console's desk and, when the call has an Asker,
// to the client's user at the same time; the first answer decides and the
// other question is withdrawn. A client that cannot ask its user leaves
// the console to answer. askTimeout bounds both.
func (s *Service) askBoth(ctx context.Context, call Call, req *approval.Request, wait time.Duration, deny func(string, ...any) *approval.Decision) *approval.Decision {
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	expires, _ := actx.Deadline()
	desk := s.Policy.Desk()
	w, off := desk.put(call.Owner, req, expires)
	defer off()
	type answer struct {
		d   *approval.Decision
		err error
	}
	var client chan answer // nil: the client is not (or no longer) asked
	if call.Asker != nil {
		client = make(chan answer, 1)
		go func() {
			d, err := call.Asker.Ask(actx, call.Owner, req)
			client <- answer{d, err}
		}()
	}
	console := func(approved bool) *approval.Decision {
		if approved {
			return &approval.Decision{Approved: true, Reason: "approved by the user at the console", DecidedBy: approval.ByUser}
		}
		return &approval.Decision{Reason: "denied by the user at the console", DecidedBy: approval.ByUser}
	}
	var clientErr error
	for {
		select {
		case a := <-client:
			switch {
			case errors.Is(a.err, ErrAskedLater):
				// The call stops here and comes back with the client's
				// answer: its question leaves the desk with it.
				return &approval.Decision{Reason: "denied for now: the user is being asked, and the call is repeated with the answer", DecidedBy: approval.ByNone}
			case a.err == nil && a.d != nil:
				if approved, ok := desk.claim(w); !ok {
					return console(approved) // the console was first
				}
				return a.d
			}
			// The client cannot ask its user: the console still can.
			clientErr, client = a.err, nil
			if clientErr == nil {
				clientErr = errors.New("the client gave no answer")
			}
		case <-w.done:
			return console(w.approve) // cancel (deferred) withdraws the client's question
		case <-actx.Done():
			if approved, answered := desk.claim(w); !answered {
				return console(approved) // answered as the wait ended
			}
			if ctx.Err() != nil {
				return deny("the call ended before the user answered")
			}
			if clientErr != nil {
				return deny("nobody answered at the console within %v (approval.askTimeout), and the client could not ask its user: %v", wait, clientErr)
			}
			return deny("the user did not answer within %v (approval.askTimeout), on the client or at the console", wait)
		}
	}
}
