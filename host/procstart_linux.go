package host

import (
	"bytes"
	"os"
	"strconv"
)

// processStart is when pid started, in clock ticks since boot (field 22
// of /proc/PID/stat), or "" when it cannot be read. With the pid it names
// one process for good: a pid the kernel gave again has another start.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return ""
	}
	return string(fields[19]) // field 22: fields 3.. start after ')'
}
