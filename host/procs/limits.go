package procs

import "fmt"

// Limits bound what one command's tree may take. A zero field means the
// manager's default; a negative one means no limit.
type Limits struct {
	// Processes caps the tasks alive in the tree at once: processes and
	// their threads (the kernel's pids controller counts both). A fork or
	// clone beyond it fails (EAGAIN); nothing is killed.
	Processes int64
	// MemoryBytes caps the tree's memory (swap included, page cache too,
	// which is reclaimed first). Beyond it the kernel kills a process of
	// the tree (the largest).
	MemoryBytes int64
}

// The limits' defaults, for a manager configured with none.
const (
	// DefaultMaxProcesses stops a fork bomb long before it takes the
	// machine's pids (32,768 by default) while a parallel build, a
	// compiler and a few dozen threads per core, stays far below it.
	DefaultMaxProcesses = 4096
	// DefaultMemoryShare is the share of the memory the host may use
	// (the machine's, or less where the host's own cgroup caps it) that
	// one tree may take: a runaway allocation is stopped while half is
	// left to everything else, and a build that needs gigabytes gets them.
	DefaultMemoryShare = 2
)

// Limit names, as a subprocess.LimitHit's Limit has them.
const (
	LimitProcesses = "processes"
	LimitMemory    = "memory"
)

// LimitsStatus says how the limits of command trees are enforced.
type LimitsStatus struct {
	// Available is false when no limit can be enforced; Reason says why.
	Available bool
	Reason    string
	// Processes and Memory name what enforces each ("cgroup v2", "cgroup
	// v1"), "" for one that is not.
	Processes, Memory string
	// Defaults are the limits of a command that asks for none (0 for
	// one that is not enforced).
	Defaults Limits
}

// String is the status in one line: "pids 4096 and memory 11.7 GiB per
// command (cgroup v1)", or "unavailable (reason)".
func (s LimitsStatus) String() string {
	if !s.Available {
		return "unavailable (" + s.Reason + ")"
	}
	var parts []string
	switch {
	case s.Processes == "":
	case s.Defaults.Processes > 0:
		parts = append(parts, fmt.Sprintf("%d processes by %s", s.Defaults.Processes, s.Processes))
	default:
		parts = append(parts, "processes unlimited unless an executor sets a limit, by "+s.Processes)
	}
	switch {
	case s.Memory == "":
	case s.Defaults.MemoryBytes > 0:
		parts = append(parts, fmt.Sprintf("%s of memory by %s", FormatBytes(s.Defaults.MemoryBytes), s.Memory))
	default:
		parts = append(parts, "memory unlimited unless an executor sets a limit, by "+s.Memory)
	}
	out := "per command: "
	for i, p := range parts {
		if i > 0 {
			out += ", "
		}
		out += p
	}
	if s.Reason != "" {
		out += " (" + s.Reason + ")"
	}
	return out
}

// FormatBytes writes n in the largest binary unit that keeps it readable:
// "2 GiB", "11.7 GiB", "512 MiB", "900 bytes".
func FormatBytes(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// resolve is l with the defaults filled in: a zero field takes def's, and
// a negative one means none (0).
func (l Limits) resolve(def Limits) Limits {
	pick := func(v, d int64) int64 {
		switch {
		case v < 0:
			return 0
		case v == 0:
			return max(d, 0)
		}
		return v
	}
	return Limits{Processes: pick(l.Processes, def.Processes), MemoryBytes: pick(l.MemoryBytes, def.MemoryBytes)}
}
