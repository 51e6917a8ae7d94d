package registry_test

import (
	"context"
	"fmt"

	"github.com/dshrun/dsh/registry"
)

// A shell plugin provides "shell"; a jobs plugin injects it. The jobs
// plugin waits for the shell, and is unloaded before the shell goes away.
func Example() {
	r := registry.New(registry.Options{Observe: func(ev registry.Event) {
		if ev.Reason != "" {
			fmt.Printf("%s: %s -> %s (%s)\n", ev.Scope, ev.From, ev.To, ev.Reason)
			return
		}
		fmt.Printf("%s: %s -> %s\n", ev.Scope, ev.From, ev.To)
	}})
	ctx := context.Background()

	jobs, _ := r.Add(registry.Spec{
		ID:     "jobs",
		Inject: []registry.Dep{{Key: "shell"}},
		Apply: func(ctx context.Context, s *registry.Scope) error {
			shell, _, _ := r.Lookup("shell")
			_, err := s.Effect("job table", func(context.Context) error {
				fmt.Println("jobs: dropping the job table of", shell)
				return nil
			})
			return err
		},
	})
	_ = r.Settled(ctx)
	fmt.Println("jobs is", jobs.State(), "-", jobs.Reason())

	shell, _ := r.Add(registry.Spec{
		ID:    "bash",
		Label: `"bash" (bin/dsh-bash-local)`,
		Apply: func(ctx context.Context, s *registry.Scope) error {
			_, err := s.Provide("shell", "bash 5.2")
			return err
		},
	})
	_ = r.Settled(ctx)

	_ = shell.Dispose(ctx)
	_ = r.Close(ctx)
	// Output:
	// jobs is pending - waiting for: shell
	// bash: pending -> loading
	// bash: loading -> active
	// jobs: pending -> loading
	// jobs: loading -> active
	// jobs: active -> unloading
	// jobs: dropping the job table of bash 5.2
	// jobs: unloading -> pending (waiting for: shell)
	// bash: active -> unloading
	// bash: unloading -> disposed
	// jobs: pending -> disposed
}
