package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/retry"
	"drover/internal/rules"
)

// RegisterOptions is what a runner a fleet target started needs to turn
// its single-use registration token into a login of its own.
type RegisterOptions struct {
	Hubs   []string // one deployment's hubs: a try that fails goes to the next
	Home   string
	Token  string // the registration token (from a 0600 file or the environment)
	Labels map[string]string
}

// Register makes a runner token on this machine and exchanges the
// registration token for it (the hub learns only its hash), then saves the
// login. A home that holds a login already keeps it: a restarted runner
// does not register twice. A lost answer is retried with the same key,
// which the hub takes as the same registration.
func Register(ctx context.Context, o RegisterOptions) error {
	if _, err := LoadLogin(o.Home); err == nil {
		return nil
	}
	hubs, err := rules.HubURLs(strings.Join(o.Hubs, ","))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(o.Token, auth.PrefixRegistration) {
		return fmt.Errorf("the registration token is not one: it starts with %s (made by `drover fleet launch`)", auth.PrefixRegistration)
	}
	own := auth.NewToken(auth.PrefixRunner)
	body, err := json.Marshal(apitypes.RegisterRequest{Key: auth.Hash(own), Labels: o.Labels})
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var lastErr error
	for try := range 6 {
		hub := hubs[try%len(hubs)]
		if try > 0 {
			if err := retry.Sleep(ctx, retryCeiling(try-1)); err != nil {
				return fmt.Errorf("register with %s: %w", hub, err)
			}
		}
		name, transient, err := registerOnce(ctx, client, hub+apitypes.APIPrefix+"/runner/register", o.Token, body)
		if err == nil {
			return SaveLogin(o.Home, Login{Hub: hub, Name: name, Token: own})
		}
		if !transient {
			return err
		}
		lastErr = err
	}
	return lastErr
}

func registerOnce(ctx context.Context, c *http.Client, u, token string, body []byte) (name string, transient bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", false, fmt.Errorf("register at %s: %w", u, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", true, fmt.Errorf("register: no drover hub answered: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusCreated {
		var v apitypes.RunnerView
		if json.Unmarshal(b, &v) != nil || !ValidName(v.Name) {
			return "", false, fmt.Errorf("%s answered HTTP 201 without a runner: check --hub", u)
		}
		return v.Name, false, nil
	}
	var e apitypes.ErrorBody
	msg := "HTTP " + resp.Status
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		msg = e.Error.Message
	}
	return "", resp.StatusCode >= 500, fmt.Errorf("hub refused the runner registration: %s", msg)
}
