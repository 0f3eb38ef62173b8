package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/retry"
)

// Submit creates a job. created is false when the request's Key matched a job
// the caller submitted before (that job is returned).
func (c *Client) Submit(ctx context.Context, req apitypes.SubmitRequest) (v apitypes.JobView, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/jobs", body: req, keyed: req.Key != ""}, &v)
	if err != nil {
		return v, false, fmt.Errorf("submit job: %w", err)
	}
	return v, status == http.StatusCreated, nil
}

// JobFilter selects jobs to list. Zero values mean no filter (and the hub's
// default limit).
type JobFilter struct {
	State job.State
	Limit int
}

// Jobs lists jobs, newest first.
func (c *Client) Jobs(ctx context.Context, f JobFilter) (apitypes.JobList, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return decode[apitypes.JobList](ctx, c, call{method: http.MethodGet, path: "/jobs", query: q}, "list jobs")
}

// Job returns one job with its attempts.
func (c *Client) Job(ctx context.Context, id string) (apitypes.JobView, error) {
	return c.job(ctx, id, false)
}

func (c *Client) job(ctx context.Context, id string, follow bool) (apitypes.JobView, error) {
	return decode[apitypes.JobView](ctx, c, call{method: http.MethodGet, path: "/jobs/" + seg(id), follow: follow},
		"get job "+id)
}

// Wait polls a job until it ended and returns it. Like FollowLog it waits
// out a hub restart; only ctx ends the wait.
func (c *Client) Wait(ctx context.Context, id string) (apitypes.JobView, error) {
	return c.pollJob(ctx, id, func(apitypes.JobView) bool { return false })
}

// pollJob gets the job, backing off up to 2s, until done says so or the job ended.
func (c *Client) pollJob(ctx context.Context, id string, done func(apitypes.JobView) bool) (apitypes.JobView, error) {
	poll := retry.Policy{First: c.minDelay, Max: min(c.maxDelay, 2*time.Second)}
	for n := 0; ; n++ {
		j, err := c.job(ctx, id, true)
		if err != nil || done(j) || j.State.Terminal() {
			return j, err
		}
		if err := retry.Sleep(ctx, poll.Delay(n)); err != nil {
			return j, err
		}
	}
}

// Cancel asks the hub to cancel a job. A running job keeps its state (with
// Cancelling set) until its runner has stopped it.
func (c *Client) Cancel(ctx context.Context, id string) (apitypes.JobView, error) {
	return c.jobAction(ctx, id, "cancel")
}

// Retry asks for another attempt of a job that ended (or whose outcome is unknown).
func (c *Client) Retry(ctx context.Context, id string) (apitypes.JobView, error) {
	return c.jobAction(ctx, id, "retry")
}

func (c *Client) jobAction(ctx context.Context, id, action string) (apitypes.JobView, error) {
	return decode[apitypes.JobView](ctx, c, call{method: http.MethodPost, path: "/jobs/" + seg(id) + "/" + action},
		action+" job "+id)
}

// Events returns a job's history after sequence number after (0: from the start).
func (c *Client) Events(ctx context.Context, id string, after int64) (apitypes.EventList, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", itoa(after))
	}
	return decode[apitypes.EventList](ctx, c, call{method: http.MethodGet, path: "/jobs/" + seg(id) + "/events", query: q},
		"get events of job "+id)
}
