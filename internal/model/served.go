package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// servedContext is the context length an OpenAI-compatible server says it
// serves the model with, 0 when it says none: vLLM's max_model_len in
// GET /v1/models, else Ollama's num_ctx (what it truly serves: past it
// Ollama cuts the prompt silently) in POST /api/show.
func (c *chatCaller) servedContext(ctx context.Context) int64 {
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int64  `json:"max_model_len"`
		} `json:"data"`
	}
	if c.getJSON(ctx, http.MethodGet, c.base+"/models", nil, &list) == nil {
		for _, m := range list.Data {
			if m.MaxModelLen > 0 && (m.ID == c.model || len(list.Data) == 1) {
				return m.MaxModelLen
			}
		}
	}
	var show struct {
		Parameters string `json:"parameters"`
	}
	root := strings.TrimSuffix(c.base, "/v1")
	if c.getJSON(ctx, http.MethodPost, root+"/api/show", map[string]string{"model": c.model}, &show) == nil {
		for line := range strings.Lines(show.Parameters) {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "num_ctx" {
				if n, err := strconv.ParseInt(f[1], 10, 64); err == nil && n > 0 {
					return n
				}
			}
		}
	}
	return 0
}

// getJSON makes one small request of the server's own API (not the
// model's) and decodes its JSON answer.
func (c *chatCaller) getJSON(ctx context.Context, method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}
