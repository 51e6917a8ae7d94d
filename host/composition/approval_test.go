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
	if _, err := loadSandbox(t, dir, "approval:\n  askTimeOut: 1m\nplugins: []\n", nil); err == nil || !strings.Contains(err.Error(), "(allowed: rules, otherwise, askTimeout)") {
		t.Errorf("a misspelt key: %v", err)
	}
}
