package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"drover/internal/protocol"
	"drover/internal/rules"
)

// transferTimeout bounds one try of a publication or a context download:
// a bundle up to the transfer cap over a slow link.
const transferTimeout = 10 * time.Minute

var _ protocol.Transfers = (*Client)(nil)

// refQuery names an attempt in a runner call's query.
func refQuery(ref protocol.AttemptRef) url.Values {
	return url.Values{"job": {ref.Job}, "attempt": {ref.Attempt}, "epoch": {itoa(ref.Epoch)}}
}

// Publish posts p's bundle to POST /runner/publish (protocol.Transfers has
// its flow and cancellation). The hub deduplicates by commit, so a try
// that failed to reach it is repeated like a keyed POST.
func (c *Client) Publish(ctx context.Context, ref protocol.AttemptRef, p protocol.Publication) (protocol.PublishResult, error) {
	q := refQuery(ref)
	q.Set("commit", p.Commit)
	q.Set("sha256", p.SHA256)
	q.Set("checkpoint", "0")
	if p.Checkpoint {
		q.Set("checkpoint", "1")
	}
	if len(p.Sparse) > 0 {
		q["sparse"] = p.Sparse
	}
	r := call{method: http.MethodPost, path: "/runner/publish", query: q, keyed: true,
		contentType: "application/x-git-bundle", timeout: transferTimeout}
	var res protocol.PublishResult
	err := c.retry(ctx, r, func() error {
		return c.send(ctx, r, io.NewSectionReader(p.Bundle, 0, p.Size), func(resp *http.Response) error {
			if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&res); err != nil {
				return &connError{fmt.Errorf("read the answer to the publication: %w", err)}
			}
			if res.Head == "" {
				return errors.New("the hub answered the publication without a head")
			}
			return nil
		})
	})
	if err != nil {
		return protocol.PublishResult{}, fmt.Errorf("publish %s: %w", p.Commit, err)
	}
	return res, nil
}

// ContextFiles reads GET /runner/context, a tar, into file (protocol.
// Transfers has its flow and cancellation). What the hub sends is checked
// again here: only regular files with clean names, within the limits.
func (c *Client) ContextFiles(ctx context.Context, ref protocol.AttemptRef, file func(name string, data io.Reader) error) error {
	r := call{method: http.MethodGet, path: "/runner/context", query: refQuery(ref), timeout: transferTimeout}
	err := c.retry(ctx, r, func() error {
		return c.send(ctx, r, nil, func(resp *http.Response) error {
			// Not a connError: once file saw a byte, a retry would repeat it.
			return rules.ReadContextTar(resp.Body, file)
		})
	})
	if err != nil {
		return fmt.Errorf("fetch context files: %w", err)
	}
	return nil
}
