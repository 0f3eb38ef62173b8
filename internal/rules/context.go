package rules

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
)

// The context-file policy lives here because the CLI checks it before an
// upload and the hub checks it again on receipt: both must agree.

// privateKeyPEM matches the armour line of a PEM or OpenSSH/PGP private key.
var privateKeyPEM = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----`)

// CheckContextName refuses a context file name that is not a clean relative
// path inside the context folder, or that names a secret by convention
// (.env files, SSH keys, PEM and key files).
func CheckContextName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("context file name is empty")
	case len(name) > 1024:
		return fmt.Errorf("context file name %.40q… is over 1024 bytes", name)
	case strings.ContainsRune(name, '\\'):
		return fmt.Errorf("context file name %q has a backslash", name)
	case CheckPlainText("", name, false) != nil:
		return CheckPlainText(fmt.Sprintf("context file name %q", name), name, false)
	case path.IsAbs(name) || path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../"):
		return fmt.Errorf("context file name %q is not a clean relative path inside the context folder", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".git" {
			return fmt.Errorf("context file name %q has a .git component", name)
		}
	}
	base := strings.ToLower(path.Base(name))
	switch {
	case base == ".env" || strings.HasPrefix(base, ".env.") || strings.HasSuffix(base, ".env"):
		return fmt.Errorf("context file %q looks like a .env file (secrets); refused", name)
	case strings.HasPrefix(base, "id_rsa") || strings.HasPrefix(base, "id_dsa") ||
		strings.HasPrefix(base, "id_ecdsa") || strings.HasPrefix(base, "id_ed25519"):
		return fmt.Errorf("context file %q looks like an SSH key; refused", name)
	}
	for _, ext := range []string{".pem", ".key", ".p12", ".pfx"} {
		if strings.HasSuffix(base, ext) {
			return fmt.Errorf("context file %q has a private key extension (%s); refused", name, ext)
		}
	}
	return nil
}

// CheckContextFile checks one context file: its name, its size and that its
// content holds no private key.
func CheckContextFile(name string, data []byte) error {
	if err := CheckContextName(name); err != nil {
		return err
	}
	if len(data) > MaxContextFile {
		return fmt.Errorf("context file %q is %d bytes; the limit is %d", name, len(data), MaxContextFile)
	}
	if bytes.Contains(data, []byte("PRIVATE KEY")) && privateKeyPEM.Match(data) {
		return fmt.Errorf("context file %q contains a private key; refused", name)
	}
	return nil
}

// CheckContextFiles checks a whole set: each file, their number, their
// total size and that no name repeats.
func CheckContextFiles(files []ContextUpload) error {
	if len(files) > MaxContextFiles {
		return fmt.Errorf("%d context files; the limit is %d", len(files), MaxContextFiles)
	}
	seen := make(map[string]bool, len(files))
	total := 0
	for _, f := range files {
		if err := CheckContextFile(f.Name, f.Data); err != nil {
			return err
		}
		if seen[f.Name] {
			return fmt.Errorf("context file %q is given twice", f.Name)
		}
		seen[f.Name] = true
		total += len(f.Data)
		if total > MaxContextTotal {
			return fmt.Errorf("context files take more than %d bytes in all", MaxContextTotal)
		}
	}
	// A file and a folder of the same name cannot both be written.
	for _, f := range files {
		for dir := path.Dir(f.Name); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return fmt.Errorf("context file %q is also the folder of %q", dir, f.Name)
			}
		}
	}
	return nil
}

// ReadContextTar reads the body of GET /runner/context, a tar of the job's
// context files, into file one file at a time. It is checked again as it
// is read (a hub, or a man in the middle of a plain-HTTP one, might send
// anything): only regular files with names CheckContextName accepts,
// within MaxContextFiles, MaxContextFile and MaxContextTotal.
func ReadContextTar(rd io.Reader, file func(name string, data io.Reader) error) error {
	tr := tar.NewReader(io.LimitReader(rd, MaxContextTotal+MaxContextFiles*(64<<10)))
	var n int
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read context files: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("context file %q is not a regular file", h.Name)
		}
		if err := CheckContextName(h.Name); err != nil {
			return err
		}
		n, total = n+1, total+h.Size
		if n > MaxContextFiles || h.Size > MaxContextFile || total > MaxContextTotal {
			return fmt.Errorf("context files over the limits (%d files, %d bytes each, %d in all)", MaxContextFiles, MaxContextFile, MaxContextTotal)
		}
		if err := file(h.Name, io.LimitReader(tr, h.Size)); err != nil {
			return err
		}
	}
}

// ContextUpload is one context file sent with a submission.
type ContextUpload struct {
	Name string `json:"name"` // relative, clean, no ".."
	Data []byte `json:"data"` // base64 in JSON
}
