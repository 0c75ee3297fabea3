package job

import (
	"encoding/json"
	"testing"
)

// Scenario: A recipient recorded before recipients were neutral still addresses its sender
func TestRecipientReadsOlderJobs(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Recipient
	}{
		{"neutral", `{"address":"42","message":"7","status_message":"555","language":"ru"}`,
			Recipient{Address: "42", Message: "7", StatusMessage: "555", Language: "ru"}},
		{"telegram-shaped", `{"chat_id":42,"message_id":7,"status_message_id":555,"language":"en"}`,
			Recipient{Address: "42", Message: "7", StatusMessage: "555", Language: "en"}},
		{"telegram-shaped without a status message", `{"chat_id":-1001234,"message_id":7}`,
			Recipient{Address: "-1001234", Message: "7"}},
		{"numbers in the neutral fields", `{"address":42,"status_message":0}`, Recipient{Address: "42"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got Recipient
			if err := json.Unmarshal([]byte(tc.json), &got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v; want %+v", got, tc.want)
			}
			again, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Recipient
			if err := json.Unmarshal(again, &back); err != nil || back != got {
				t.Errorf("round trip of %s gave %+v, %v", again, back, err)
			}
		})
	}
	var r Recipient
	if err := json.Unmarshal([]byte(`{"address":{"chat":1}}`), &r); err == nil {
		t.Error("an object as an address was accepted")
	}
}
