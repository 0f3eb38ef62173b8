package web

import (
	"bytes"
	"html/template"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Diffs: the job page shows at most diffBytes of a result's change; the
// raw diff link gives at most rawDiffBytes.
const (
	diffBytes    = 256 << 10
	rawDiffBytes = 32 << 20
)

// Diff is a job's result as a patch (git diff --stat --patch BASE HEAD).
type Diff struct {
	Patch []byte
	Cut   bool // the change is longer than the bound asked for
}

// diffView is the rendered diff of the job page.
type diffView struct {
	HTML         template.HTML
	Cut          bool
	Files, Lines int
}

// renderDiff renders a patch as escaped lines, classed by what they are
// (the summary, a file's header, a hunk, an added or removed line). Control characters
// show as symbols: the patch is the agent's output, never markup.
func renderDiff(patch []byte, cut bool) diffView {
	if cut { // no half line at the cut
		if i := bytes.LastIndexByte(patch, '\n'); i >= 0 {
			patch = patch[:i+1]
		}
	}
	v := diffView{Cut: cut}
	var b strings.Builder
	inHeader := false
	for line := range bytes.Lines(patch) {
		line = bytes.TrimSuffix(line, []byte{'\n'})
		class := "dc"
		switch {
		case bytes.HasPrefix(line, []byte("diff --git ")):
			class, inHeader = "dh", true
			v.Files++
		case bytes.HasPrefix(line, []byte("@@")):
			class, inHeader = "dk", false
		case inHeader:
			class = "dh"
		case v.Files == 0:
			class = "ds" // the --stat summary before the first file
		case bytes.HasPrefix(line, []byte("+")):
			class = "da"
		case bytes.HasPrefix(line, []byte("-")):
			class = "dd"
		}
		b.WriteString(`<div class="` + class + `">`)
		writeText(&b, line)
		b.WriteString("</div>")
		v.Lines++
	}
	v.HTML = template.HTML(b.String()) // #nosec: every byte of the patch was escaped by writeText
	return v
}

// writeText writes s as HTML text: escaped, invalid UTF-8 as U+FFFD and
// control characters (but tab) as their Unicode control pictures.
func writeText(b *strings.Builder, s []byte) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune('\uFFFD')
		case r == '\t':
			b.WriteByte('\t')
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('\u2421')
		default:
			template.HTMLEscape(b, s[i:i+size])
		}
		i += size
	}
}

// rawDiff is GET /jobs/{id}/diff: the result's patch as text, to read or
// save (cut at rawDiffBytes, with a last line saying so).
func (s *Server) rawDiff(w http.ResponseWriter, r *http.Request, ss *session) error {
	id := r.PathValue("id")
	d, err := s.b.Diff(r.Context(), ss.User, id, rawDiffBytes)
	if err != nil {
		return err
	}
	if d.Patch == nil {
		return &Error{Status: http.StatusNotFound, Msg: "job " + id + " has published no change"}
	}
	headers(w, "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", `inline; filename="`+id+`.diff"`)
	_, _ = w.Write(d.Patch)
	if d.Cut {
		_, _ = w.Write([]byte("\n[drover: the diff is cut here at 32 MiB; run drover diff " + id + " for all of it]\n"))
	}
	return nil
}
