package host

import "github.com/dshrun/dsh/host/consent"

// The console's approval desk: with approval.channels listing console, a
// question ctx.approval would put to the client's user waits here too
// (package consent puts and withdraws it); the first answer counts.

// Question is one approval question waiting at the console.
type Question = consent.Question

// ErrNoQuestion is AnswerQuestion's error for a question not waiting.
var ErrNoQuestion = consent.ErrNoQuestion

// Questions are the questions waiting at the console, oldest first.
func (h *Host) Questions() []Question { return h.approval.Desk().Questions() }

// QuestionChanges signals every question put on the desk or gone from it;
// signals coalesce. stop ends the subscription.
func (h *Host) QuestionChanges() (changes <-chan struct{}, stop func()) {
	return h.approval.Desk().Changes()
}

// AnswerQuestion is the console's answer to question id: the user
// approves or denies the one run it asks about.
func (h *Host) AnswerQuestion(id string, approve bool) error {
	return h.approval.Desk().Answer(id, approve)
}
