package composition

import (
	"strings"
	"testing"
	"time"
)

func TestApprovalAskTimeout(t *testing.T) {
	dir := t.TempDir()
	c, err := loadSandbox(t, dir, "approval:\n  askTimeout: 90s\nplugins: []\n", nil)
	if err != nil || c.Approval.AskTimeout != 90*time.Second {
		t.Fatalf("askTimeout: %+v %v", c.Approval, err)
	}
	if c, err := loadSandbox(t, dir, "approval: {}\nplugins: []\n", nil); err != nil || c.Approval.AskTimeout != 0 {
		t.Fatalf("no askTimeout: %+v %v", c.Approval, err)
	}
	for _, bad := range []string{"0s", "-1m", "soon", "2h", "5"} {
		_, err := loadSandbox(t, dir, "approval:\n  askTimeout: "+bad+"\nplugins: []\n", nil)
		if err == nil || !strings.Contains(err.Error(), "comp.yaml:2:15: approval.askTimeout: want a positive Go duration up to 1h0m0s") {
			t.Errorf("askTimeout %s: %v", bad, err)
		}
	}
	if _, err := loadSandbox(t, dir, "approval:\n  askTimeOut: 1m\nplugins: []\n", nil); err == nil || !strings.Contains(err.Error(), "(allowed: rules, otherwise, askTimeout, channels)") {
		t.Errorf("a misspelt key: %v", err)
	}
}

// approval.channels lists where questions go; each entry is checked at its
// line, and leaving it out is the client alone.
func TestApprovalChannels(t *testing.T) {
	dir := t.TempDir()
	c, err := loadSandbox(t, dir, "approval:\n  channels: [client, console]\nplugins: []\n", nil)
	if err != nil || !c.Approval.Asks(ChannelConsole) || !c.Approval.Asks(ChannelClient) {
		t.Fatalf("both: %+v %v", c.Approval, err)
	}
	c, err = loadSandbox(t, dir, "approval:\n  channels:\n    - console\nplugins: []\n", nil)
	if err != nil || !c.Approval.Asks(ChannelConsole) || c.Approval.Asks(ChannelClient) {
		t.Fatalf("console alone: %+v %v", c.Approval, err)
	}
	c, err = loadSandbox(t, dir, "approval: {}\nplugins: []\n", nil)
	if err != nil || c.Approval.Asks(ChannelConsole) || !c.Approval.Asks(ChannelClient) {
		t.Fatalf("default: %+v %v", c.Approval, err)
	}
	for bad, want := range map[string]string{
		"approval:\n  channels:\n    - client\n    - pager\nplugins: []\n":  `comp.yaml:4:7: approval.channels entry 2: want one of client, console, got the string "pager"`,
		"approval:\n  channels:\n    - client\n    - client\nplugins: []\n": "comp.yaml:4:7: approval.channels entry 2: client is listed twice",
		"approval:\n  channels: []\nplugins: []\n":                          "comp.yaml:2:13: approval.channels must be a list of one or both of client, console",
		"approval:\n  channels: console\nplugins: []\n":                     "comp.yaml:2:13: approval.channels must be a list",
	} {
		if _, err := loadSandbox(t, dir, bad, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", bad, err, want)
		}
	}
}
