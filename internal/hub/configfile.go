package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"drover/internal/netpolicy"
)

// File is the hub's config file (drover hub --config FILE), JSON:
//
//	{"network": {"allow_open": false,
//	             "policies": {"go": ["proxy.golang.org", "sum.golang.org"]}}}
//
// docs/operator.md describes it.
type File struct {
	Network netpolicy.Catalog `json:"network"`
}

// ReadFile reads and checks the hub's config file: an unknown field, a
// malformed pattern or one that matches every host is an error that names
// it.
func ReadFile(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read hub config: %w", err)
	}
	var f File
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return File{}, fmt.Errorf("hub config %s: %w", path, err)
	}
	if err := f.Network.Check(); err != nil {
		return File{}, fmt.Errorf("hub config %s: %w", path, err)
	}
	return f, nil
}
