package sqlstore

import (
	"errors"

	"drover/internal/store"
)

var errTODO = errors.New("forge records are not stored yet")

func (t *tx) PutForge(store.Forge) error                                       { return errTODO }
func (t *tx) Forge(string) (store.Forge, error)                                { return store.Forge{}, errTODO }
func (t *tx) Forges(bool) ([]store.Forge, error)                               { return nil, errTODO }
func (t *tx) RemoveForge(string) error                                         { return errTODO }
func (t *tx) PutPublication(store.Publication) error                           { return errTODO }
func (t *tx) Publication(string) (store.Publication, error)                    { return store.Publication{}, errTODO }
func (t *tx) Publications(store.PublicationState) ([]store.Publication, error) { return nil, errTODO }
