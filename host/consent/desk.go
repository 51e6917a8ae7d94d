package consent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dshrun/dsh/core/approval"
	"github.com/dshrun/dsh/internal/notify"
)

// The console's desk: with approval.channels listing console, a question
// waits here (as well as on the client, when it can ask its user) until
// someone at the console answers it, the client's user answers first, the
// wait ends or the call it serves ends. Whichever answer comes first
// decides; the other question is withdrawn.

// Question is one question waiting at the console.
// As JSON its keys are camelCase and hosts is never null.
type Question struct {
	ID, Owner, Kind, Command, Justification string
	Hosts                                   []string
	AskedAt, ExpiresAt                      time.Time
}

type questionJSON struct {
	ID            string    `json:"id"`
	Owner         string    `json:"owner"`
	Kind          string    `json:"kind"`
	Command       string    `json:"command"`
	Hosts         []string  `json:"hosts"`
	Justification string    `json:"justification"`
	AskedAt       time.Time `json:"askedAt"`
	ExpiresAt     time.Time `json:"expiresAt"`
}

func (q Question) MarshalJSON() ([]byte, error) {
	hosts := q.Hosts
	if hosts == nil {
		hosts = []string{}
	}
	return json.Marshal(questionJSON{ID: q.ID, Owner: q.Owner, Kind: q.Kind, Command: q.Command, Hosts: hosts,
		Justification: q.Justification, AskedAt: q.AskedAt, ExpiresAt: q.ExpiresAt})
}

// Desk holds the questions waiting at the console.
type Desk struct {
	mu      sync.Mutex
	pending map[string]*waiting
	changes notify.Set
}

// waiting is a question and its answer, once given.
type waiting struct {
	q        Question
	answered bool
	approve  bool
	done     chan struct{} // closed by the console's answer
}

// ErrNoQuestion is AnswerQuestion's error for a question no longer (or
// never) waiting: answered, timed out, or its call ended.
var ErrNoQuestion = errors.New("no such question waiting: it was answered, timed out, or its call ended")

// Questions are the questions waiting, oldest first.
func (d *Desk) Questions() []Question {
	d.mu.Lock()
	out := make([]Question, 0, len(d.pending))
	for _, w := range d.pending {
		if !w.answered {
			q := w.q
			q.Hosts = slices.Clone(q.Hosts)
			out = append(out, q)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b Question) int { return a.AskedAt.Compare(b.AskedAt) })
	return out
}

// Changes signals every question put or gone; signals coalesce.
func (d *Desk) Changes() (<-chan struct{}, func()) { return d.changes.Subscribe() }

// Answer gives the console's answer to question id. It fails if the
// question is no longer waiting (answered on the client meanwhile, too).
func (d *Desk) Answer(id string, approve bool) error {
	d.mu.Lock()
	w := d.pending[id]
	if w == nil || w.answered {
		d.mu.Unlock()
		return ErrNoQuestion
	}
	w.answered, w.approve = true, approve
	close(w.done)
	d.mu.Unlock()
	d.changes.Fire()
	return nil
}

// put puts a question on the desk until the returned func takes it off.
func (d *Desk) put(owner string, req *approval.Request, expires time.Time) (*waiting, func()) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	w := &waiting{
		q: Question{
			ID: hex.EncodeToString(b[:]), Owner: owner, Kind: req.Kind, Command: req.Command,
			Justification: req.Reason, Hosts: slices.Clone(req.Hosts), AskedAt: time.Now(), ExpiresAt: expires,
		},
		done: make(chan struct{}),
	}
	d.mu.Lock()
	if d.pending == nil {
		d.pending = map[string]*waiting{}
	}
	d.pending[w.q.ID] = w
	d.mu.Unlock()
	d.changes.Fire()
	return w, func() {
		d.mu.Lock()
		delete(d.pending, w.q.ID)
		d.mu.Unlock()
		d.changes.Fire()
	}
}

// claim settles w for an answer that came from elsewhere (the client):
// ok is false when the console answered first, whose answer then counts.
func (d *Desk) claim(w *waiting) (consoleApproved, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.answered {
		return w.approve, false
	}
	w.answered = true
	return false, true
}
