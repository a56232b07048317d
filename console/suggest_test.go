package console_test

import (
	"testing"
)

// TestFilterSuggestionsAndHandlerCase: the filter forms suggest the queues
// and handlers with recent attempts, and a handler typed in another case
// finds the tasks of the handler it names.
func TestFilterSuggestionsAndHandlerCase(t *testing.T) {
	e := newEnv(t, "")
	id := e.dead(deadSpec{queue: "emails", handler: "sendWelcome", errType: "timeout", msg: "slow"})
	other := e.dead(deadSpec{queue: "billing", handler: "charge", errType: "timeout", msg: "slow"})
	for _, p := range []string{"/dead", "/groups", "/live"} {
		mustContain(t, e.get(userAdmin, p).body, `list="dl-queues"`, `list="dl-handlers"`,
			`<datalist id="dl-queues"><option value="billing"><option value="emails"></datalist>`,
			`<datalist id="dl-handlers"><option value="charge"><option value="sendWelcome"></datalist>`)
	}
	r := e.get(userAdmin, "/dead?handler=SENDWELCOME")
	mustContain(t, r.body, "/tasks/"+id.String(), `name="handler" value="sendWelcome"`)
	mustNotContain(t, r.body, "/tasks/"+other.String())
	mustContain(t, e.get(userAdmin, "/groups?handler=sendwelcome").body, `name="handler" value="sendWelcome"`, "1</strong> dead tasks in 1 groups")
	// A principal who may read one queue is suggested only its names.
	r = e.get(userOperator, "/dead?queue=emails")
	mustContain(t, r.body, `<option value="emails">`, `<option value="sendWelcome">`)
	mustNotContain(t, r.body, `<option value="billing">`, `<option value="charge">`)
}
