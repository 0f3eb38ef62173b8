package hub

import (
	"context"
	"errors"
	"net/http"

	"drover/internal/auth"
	"drover/internal/fsutil"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// Who is asking, and why they were refused: the core's half of every
// transport's authentication and of its refusals' mapping.

// AsRefusal turns any error into one we can show: store errors keep their
// meaning, anything else is internal (and logged, not shown).
func (h *Hub) AsRefusal(err error) *call.Refusal {
	var ae *call.Refusal
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, store.ErrNotFound) {
		return call.NotFound("%v", err)
	}
	if fsutil.IsNoSpace(err) {
		h.diskFull.report(h.log, h.now(), err)
		return call.Errf(http.StatusInsufficientStorage, rules.ErrNoSpace,
			"the hub's disk is full, so it stored nothing of this request; retry later (the operator must free space in the hub's data directory)")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return call.Errf(http.StatusServiceUnavailable, rules.ErrInternal, "request cancelled")
	}
	h.log.Error("internal error", "err", err)
	return call.Errf(http.StatusInternalServerError, rules.ErrInternal, "internal error (see the hub's log)")
}

// AuthenticateAs resolves a token to a principal holding a token of the
// given kind: every authenticated route's check, and the pages'.
func (h *Hub) AuthenticateAs(ctx context.Context, tok string, kind store.TokenKind) (call.Caller, error) {
	p, err := h.AuthenticateToken(ctx, tok)
	if err != nil {
		return call.Caller{}, err
	}
	if p.Kind != kind {
		return call.Caller{}, call.Forbidden("this call needs a %s token", kind)
	}
	return p, nil
}

// AuthenticateToken resolves a token to a principal.
func (h *Hub) AuthenticateToken(ctx context.Context, tok string) (call.Caller, error) {
	hash := auth.Hash(tok)
	var p call.Caller
	// Without one snapshot (every API call's read, two round trips fewer
	// on Postgres): each row is read as last committed, so whatever was
	// revoked or removed before its row's read refuses the call.
	err := store.ReadEach(ctx, h.store, func(tx store.Tx) error {
		t, err := tx.Token(hash)
		if err != nil {
			return err
		}
		if t.RevokedAt != nil {
			return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "token was revoked")
		}
		p.Kind = t.Kind
		switch t.Kind {
		case store.TokenUser:
			up, err := userPrincipal(tx, t.OwnerID)
			if err != nil {
				return err
			}
			p = up
		case store.TokenSession:
			return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "a web session is not an API token; use a user token")
		case store.TokenRunner:
			rn, err := tx.Runner(t.OwnerID)
			if err != nil {
				return err
			}
			if rn.RevokedAt != nil || rn.TokenHash != hash {
				return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "runner token was revoked")
			}
			p.RunnerID, p.Name, p.TokenHash = rn.ID, rn.Name, hash
		default:
			return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "unknown token kind")
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return call.Caller{}, call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "token not recognised")
	}
	return p, err
}

// userPrincipal is the live user as a caller with a user token.
func userPrincipal(tx store.Tx, userID string) (call.Caller, error) {
	u, err := tx.User(userID)
	if err != nil {
		return call.Caller{}, err
	}
	if u.RemovedAt != nil {
		return call.Caller{}, call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "user %s was removed", u.Name)
	}
	return call.Caller{Kind: store.TokenUser, UserID: u.ID, Name: u.Name, Admin: u.Admin}, nil
}
