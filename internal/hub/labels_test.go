package hub

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"
)

// The hub holds submitted jobs and connecting runners to the one label
// rule: a label the CLI and the runner take is taken here, and one refused
// is refused with the same reason; a runner's is closed with CloseRefused,
// on which it exits instead of reconnecting.
func TestLabelRuleAtSubmitAndHello(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	for i, tc := range protocoltest.LabelCases {
		if !utf8.ValidString(tc.Key + tc.Value) {
			continue // JSON carries only UTF-8: encoding/json would send U+FFFD
		}
		t.Run(tc.Name, func(t *testing.T) {
			labels := map[string]string{tc.Key: tc.Value}
			code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: labels}, nil)
			switch {
			case tc.OK && code != http.StatusCreated:
				t.Fatalf("submit: %d %v", code, e)
			case !tc.OK && (code != http.StatusBadRequest || !strings.Contains(e.Message, tc.Why)):
				t.Fatalf("submit: %d %v, want 400 with %q", code, e, tc.Why)
			}

			tok := th.registerRunner(fmt.Sprintf("r%d", i))
			if tc.OK {
				th.dial(tok, protocol.Hello{Labels: labels}) // fails unless welcomed
				return
			}
			sr := th.sayHello(th.srv.URL, tok, protocol.Hello{Labels: labels})
			_, err := sr.tryRead(10 * time.Second)
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != protocol.CloseRefused || !strings.Contains(ce.Reason, tc.Why) {
				t.Fatalf("hello: %v, want close %d with %q", err, protocol.CloseRefused, tc.Why)
			}
		})
	}
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: protocoltest.TooManyLabels()}, nil); code != http.StatusBadRequest {
		t.Fatalf("submit with too many labels: %d %v", code, e)
	}
}
