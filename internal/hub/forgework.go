package hub

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/apitypes"
	"drover/internal/forgethread"
	"drover/internal/forgework"
	"drover/internal/hub/call"
	"drover/internal/publish"
	"drover/internal/store"
)

// forgeworkCore adapts the core to forgework.Core: forge events that start
// jobs are a package of their own (internal/forgework).
type forgeworkCore struct{ h *Hub }

var _ forgework.Core = forgeworkCore{}

func (a forgeworkCore) Caller(ctx context.Context, userID string) (call.Caller, error) {
	return pipelineCore(a).Caller(ctx, userID)
}

func (a forgeworkCore) Project(ctx context.Context, c call.Caller, name string, manage bool) (store.Project, error) {
	var prj store.Project
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if prj, err = readProject(tx, name); err != nil {
			return err
		}
		if manage {
			return mayConfigureProject(tx, c, prj)
		}
		return mayUseProject(tx, c, prj)
	})
	return prj, err
}

func (a forgeworkCore) Base(ctx context.Context, project string) (string, error) {
	var prj store.Project
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		prj, err = readProject(tx, project)
		return err
	})
	if err != nil {
		return "", err
	}
	dir := ""
	if prj.Remote == "" {
		if err := a.h.ensureRepo(ctx, prj.Name); err != nil {
			return "", err
		}
		dir = a.h.repos.Dir(prj.Name)
	}
	return a.h.publisher.DefaultHead(ctx, prj.Config, dir)
}

func (a forgeworkCore) Submit(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error) {
	return pipelineCore(a).Submit(ctx, c, req)
}

func (a forgeworkCore) Cancel(ctx context.Context, c call.Caller, id string) error {
	return a.h.cancelJob(ctx, c, id)
}

func (a forgeworkCore) Retry(ctx context.Context, c call.Caller, id string) error {
	return a.h.retryJob(ctx, c, id)
}

// Forge opens forge connection name as forge triggers use it: every
// client of package forge reads threads and makes hooks.
func (a forgeworkCore) Forge(ctx context.Context, name string) (forgework.Forge, error) {
	var f store.Forge
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		f, err = tx.Forge(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, call.Conflict("the project's forge %s is gone; an admin adds it again (drover forges add %s)", name, name)
	} else if err != nil {
		return nil, fmt.Errorf("read forge %s: %w", name, err)
	}
	cl, err := publish.Open(f, a.h.cfg.ForgeHTTP)
	if err != nil {
		return nil, call.Conflict("forge %s: %v", name, err)
	}
	fc, ok := cl.(forgework.Forge)
	if !ok {
		return nil, call.Conflict("forge %s (%s) cannot register hooks or reply in threads", name, f.Kind)
	}
	return fc, nil
}

func (a forgeworkCore) PublicURL() string { return a.h.cfg.PublicURL }

func (a forgeworkCore) Leading() bool { return a.h.leading() }

// Attach and Reply are the forge thread's (internal/forgethread): a job a
// forge event started has its conversation there, one record of it.
func (a forgeworkCore) Attach(ctx context.Context, jobID string, t forgethread.Target) error {
	return a.h.threads.Attach(ctx, jobID, t)
}

func (a forgeworkCore) Reply(ctx context.Context, t forgethread.Target, userID string, commentID int64, body string) (bool, error) {
	return a.h.threads.Reply(ctx, t, userID, commentID, body)
}
