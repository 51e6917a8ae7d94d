package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/dshrun/dsh/internal/agentsession"
)

// Published limits of other agents' shell tools, in characters: Claude
// Code shows at most 30,000; Codex about 10,000 tokens, at 4 characters a
// token, from the head and the tail.
const (
	claudeCodeChars = 30_000
	codexChars      = 10_000 * 4
)

// transcriptChars: the characters a model reads over the transcript's
// session (internal/agentsession) from dsh, against what the same commands'
// raw output would give under Claude Code's and Codex's limits.
func transcriptChars(dir string) {
	home, err := os.MkdirTemp("", "dsh-bench-transcript-")
	check(err)
	defer os.RemoveAll(home)
	repo := filepath.Join(home, "calc")
	check(os.Mkdir(repo, 0o755))
	check(agentsession.Repo(repo))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, descs, err := agentsession.RunListing(ctx, dir, repo, home, true)
	check(err)
	fmt.Printf("what the model reads over the transcript (%d tool calls; characters)\n", len(rs))
	fmt.Printf("  %-36s %10s %10s %10s %10s\n", "step", "raw", "dsh", "claude", "codex")
	var raw, dsh, claude, codex int
	for _, r := range rs {
		n := utf8.RuneCountInString(r.Text)
		rn := utf8.RuneCountInString(r.Raw)
		c, x := min(rn, claudeCodeChars), min(rn, codexChars)
		if r.Step.Raw == "" {
			// No plain-shell equivalent (job tools, a background start):
			// every agent reads about what dsh gives.
			rn, c, x = n, n, n
		}
		raw, dsh, claude, codex = raw+rn, dsh+n, claude+c, codex+x
		fmt.Printf("  %-36s %10d %10d %10d %10d\n", trim(r.Step.Name, 36), rn, n, c, x)
	}
	fmt.Printf("  %-36s %10d %10d %10d %10d\n", "total", raw, dsh, claude, codex)
	fmt.Printf("  dsh reads %.2fx of Claude Code's limit and %.2fx of Codex's over the session\n",
		float64(dsh)/float64(claude), float64(dsh)/float64(codex))
	fmt.Printf("  the bash tool's description: %d characters\n\n", utf8.RuneCountInString(descs["bash"]))
}

func trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
