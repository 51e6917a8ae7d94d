package jobtable

import (
	"bytes"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/dshrun/dsh/host/hostlog"
)

func (t *tableProcess) Workdir() string { return t.p.Workdir() }
func (t *tableProcess) Written() int64  { return t.p.Written() }

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Each job's start and end is logged once, with how it ended, how long it
// ran and how much it printed, whichever way it ends.
func TestJobStartAndEndAreLogged(t *testing.T) {
	logs := &logBuffer{}
	f := newFixture(t, Config{Logger: hostlog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})})
	saw := func(re string) {
		t.Helper()
		r := regexp.MustCompile(re)
		for deadline := time.Now().Add(wait); !r.MatchString(logs.String()); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no line matching %s within %v:\n%s", re, wait, logs)
			}
		}
	}
	done, _ := f.start("agent", "printf abc")
	saw(`job started: owner=agent job=` + done.ID + ` command="printf abc" workdir=/\S+ pid=\d+\n`)
	saw(`job finished: owner=agent job=` + done.ID + ` command="printf abc" exit=0 duration=\S+ output_bytes=3\n`)

	killed, _ := f.start("agent", "sleep 30")
	if ok, err := f.m.Kill(bg, "agent", killed.ID); !ok || err != nil {
		t.Fatalf("kill: %v %v", ok, err)
	}
	saw(`job killed at its owner's request: owner=agent job=` + killed.ID + ` command="sleep 30" exit=SIG\w+ duration=\S+ output_bytes=0\n`)

	released, _ := f.start("other", "sleep 30")
	f.m.ReleaseOwner("other")
	saw(`job stopped: its session ended: owner=other job=` + released.ID + ` command="sleep 30" duration=\S+ output_bytes=0\n`)

	for _, id := range []string{done.ID, killed.ID, released.ID} {
		if n := len(regexp.MustCompile(`job=`+id+` `).FindAllString(logs.String(), -1)); n != 2 {
			t.Errorf("%d lines about job %s, want its start and its end:\n%s", n, id, logs)
		}
	}
}
