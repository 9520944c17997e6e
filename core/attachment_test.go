package core

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestKindOfMIME(t *testing.T) {
	t.Parallel()
	for mt, want := range map[string]AttachmentKind{
		"image/png": AttachmentImage, "IMAGE/JPEG": AttachmentImage, "audio/ogg; codecs=opus": AttachmentAudio,
		"text/plain; charset=utf-8": AttachmentFile, "video/mp4": AttachmentFile, "": AttachmentFile, "not a type": AttachmentFile,
	} {
		if got := KindOfMIME(mt); got != want {
			t.Errorf("KindOfMIME(%q) = %s, want %s", mt, got, want)
		}
	}
	if AttachmentKind("video").Valid() || !AttachmentAudio.Valid() {
		t.Error("Valid is wrong about video or audio")
	}
}

// TestAttachmentLimits: what a platform reports is judged before any
// content is read; content read is bounded whatever the headers said.
func TestAttachmentLimits(t *testing.T) {
	t.Parallel()
	img := NewAttachment("r", "a.png", "image/png", 10)
	if err := CheckAttachment(img, 11, "image/png", 10); !errors.Is(err, ErrAttachmentTooLarge) {
		t.Errorf("size over the limit: %v", err)
	}
	if err := CheckAttachment(img, 5, "application/zip", 10); !errors.Is(err, ErrAttachmentKind) {
		t.Errorf("another kind: %v", err)
	}
	if err := CheckAttachment(img, -1, "", 10); err != nil {
		t.Errorf("nothing said: %v", err)
	}
	if _, err := ReadAttachment(strings.NewReader("12345678901"), 10); !errors.Is(err, ErrAttachmentTooLarge) {
		t.Errorf("content over the limit: %v", err)
	}
	if b, err := ReadAttachment(strings.NewReader("1234567890"), 10); err != nil || string(b) != "1234567890" {
		t.Errorf("content at the limit: %q %v", b, err)
	}
	resp := func(status int, ct string, length int64, body string) *http.Response {
		r := &http.Response{StatusCode: status, Header: http.Header{}, ContentLength: length, Body: &countingBody{r: strings.NewReader(body)}}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		return r
	}
	for name, c := range map[string]struct {
		r    *http.Response
		want error
	}{
		"Gone":              {resp(404, "", -1, ""), ErrAttachmentGone},
		"Expired":           {resp(410, "", -1, ""), ErrAttachmentGone},
		"DeclaredTooLarge":  {resp(200, "image/png", 11, "0123456789a"), ErrAttachmentTooLarge},
		"OtherKind":         {resp(200, "text/html", 5, "<html"), ErrAttachmentKind},
		"UndeclaredTooLong": {resp(200, "", -1, strings.Repeat("x", 100)), ErrAttachmentTooLarge},
	} {
		_, err := AttachmentFromResponse(c.r, img, 10)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		body := c.r.Body.(*countingBody)
		if !body.closed {
			t.Errorf("%s: body not closed", name)
		}
		if (name == "DeclaredTooLarge" || name == "OtherKind" || name == "Gone") && body.read > 0 {
			t.Errorf("%s: %d bytes read before the headers were judged", name, body.read)
		}
		if name == "UndeclaredTooLong" && body.read > 11 {
			t.Errorf("read %d bytes of an over-long body; at most the limit and one", body.read)
		}
	}
	b, err := AttachmentFromResponse(resp(200, "application/octet-stream", 4, "\x89PNG"), img, 10)
	if err != nil || !bytes.Equal(b, []byte("\x89PNG")) {
		t.Errorf("octet-stream says nothing of the kind: %q %v", b, err)
	}
}

type countingBody struct {
	r      io.Reader
	read   int
	closed bool
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

func (c *countingBody) Close() error { c.closed = true; return nil }
