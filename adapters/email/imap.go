package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"mime"
	"net"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/charset"
)

// Run watches the mailbox until ctx ends: it connects, drains every
// message past the cursor into the sink, then waits with IDLE (re-issued
// every IdleRestart, before the server's 30-minute cut) or, on a server
// without IDLE, polls every PollInterval. Any failure — network, server,
// a sink that cannot record — closes the session and reconnects after an
// exponential backoff with jitter; the cursor makes that safe. It returns
// nil when ctx ends.
func (a *Adapter) Run(ctx context.Context) error {
	backoff := a.cfg.MinBackoff
	for {
		healthy, err := a.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if healthy {
			backoff = a.cfg.MinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		a.log.Warn("email: imap session ended; reconnecting", "err", err, "in", wait)
		if sleep(ctx, wait) != nil {
			return nil
		}
		backoff = min(backoff*2, a.cfg.MaxBackoff)
	}
}

// errClosed is returned when the server hangs up.
var errClosed = errors.New("email: imap connection closed")

// watch is one IMAP session. healthy reports that it got as far as
// draining the mailbox once, which resets the backoff.
func (a *Adapter) watch(ctx context.Context) (healthy bool, err error) {
	newMail := make(chan struct{}, 1)
	c, err := a.connect(ctx, &imapclient.UnilateralDataHandler{
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				select {
				case newMail <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		return false, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	sel, err := c.Select(a.cfg.IMAP.Mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return false, fmt.Errorf("email: select %s: %w", a.cfg.IMAP.Mailbox, err)
	}
	cur, err := a.loadCursor(ctx)
	if err != nil {
		return false, err
	}
	if cur.Mailbox != a.cfg.IMAP.Mailbox || cur.UIDValidity != sel.UIDValidity {
		if cur.UIDValidity != 0 {
			// The server renumbered the mailbox: every UID we hold is
			// meaningless. Start over from the backfill window; the
			// Message-ID dedup absorbs what was already handled.
			a.log.Warn("email: UIDVALIDITY changed; re-reading the backfill window",
				"old", cur.UIDValidity, "new", sel.UIDValidity, "backfill", a.cfg.Backfill)
		}
		cur = Cursor{Mailbox: a.cfg.IMAP.Mailbox, UIDValidity: sel.UIDValidity}
	}
	a.setCursor(cur)
	idle := c.Caps().Has(imap.CapIdle) || c.Caps().Has(imap.CapIMAP4rev2)
	for {
		if err := a.drain(ctx, c, &cur, sel.UIDNext); err != nil {
			return healthy, err
		}
		healthy = true
		if err := a.wait(ctx, c, idle, newMail); err != nil {
			return healthy, err
		}
		if ctx.Err() != nil {
			return healthy, nil
		}
	}
}

// connect dials, upgrades per config, and logs in.
func (a *Adapter) connect(ctx context.Context, h *imapclient.UnilateralDataHandler) (*imapclient.Client, error) {
	host, _, _ := net.SplitHostPort(a.cfg.IMAP.Addr)
	conn, err := a.dial(ctx, "tcp", a.cfg.IMAP.Addr)
	if err != nil {
		return nil, fmt.Errorf("email: imap dial %s: %w", a.cfg.IMAP.Addr, err)
	}
	opts := &imapclient.Options{
		TLSConfig: a.tlsCfg(host), UnilateralDataHandler: h,
		WordDecoder: &mime.WordDecoder{CharsetReader: charset.Reader},
	}
	// Bound the handshake; the session itself lives as long as ctx.
	conn.SetDeadline(time.Now().Add(time.Minute))
	var c *imapclient.Client
	switch {
	case a.cfg.IMAP.TLS:
		c = imapclient.New(tls.Client(conn, opts.TLSConfig), opts)
	case a.cfg.IMAP.StartTLS:
		if c, err = imapclient.NewStartTLS(conn, opts); err != nil {
			conn.Close()
			return nil, fmt.Errorf("email: imap starttls: %w", err)
		}
	default:
		c = imapclient.New(conn, opts)
	}
	if err := c.WaitGreeting(); err != nil {
		c.Close()
		return nil, fmt.Errorf("email: imap greeting: %w", err)
	}
	if err := c.Login(a.cfg.IMAP.Username, a.cfg.IMAP.Password).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("email: imap login: %w", err)
	}
	conn.SetDeadline(time.Time{})
	return c, nil
}

// wait blocks until new mail may be there: an EXISTS during IDLE, the
// IDLE restart interval, or the poll interval without IDLE.
func (a *Adapter) wait(ctx context.Context, c *imapclient.Client, idle bool, newMail <-chan struct{}) error {
	if !idle {
		select {
		case <-ctx.Done():
		case <-c.Closed():
			return errClosed
		case <-time.After(a.cfg.PollInterval):
		}
		return nil
	}
	cmd, err := c.Idle()
	if err != nil {
		return fmt.Errorf("email: idle: %w", err)
	}
	t := time.NewTimer(a.cfg.IdleRestart)
	defer t.Stop()
	closed := false
	select {
	case <-ctx.Done():
	case <-newMail:
	case <-t.C:
	case <-c.Closed():
		closed = true
	}
	if closed {
		return errClosed
	}
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("email: end idle: %w", err)
	}
	if err := cmd.Wait(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("email: idle: %w", err)
	}
	return nil
}

// drain hands every message past the cursor to the sink in UID order,
// saving the cursor after each one the sink recorded (or that was skipped
// on purpose). A cursor at UID 0 reads only the Backfill window.
func (a *Adapter) drain(ctx context.Context, c *imapclient.Client, cur *Cursor, uidNext imap.UID) error {
	if err := c.Noop().Wait(); err != nil {
		return fmt.Errorf("email: noop: %w", err)
	}
	crit := &imap.SearchCriteria{}
	since := a.now().Add(-a.cfg.Backfill)
	if cur.LastUID == 0 {
		crit.Since = since
	} else {
		crit.UID = []imap.UIDSet{{imap.UIDRange{Start: imap.UID(cur.LastUID + 1), Stop: 0}}}
	}
	data, err := c.UIDSearch(crit, nil).Wait()
	if err != nil {
		return fmt.Errorf("email: search: %w", err)
	}
	var uids []imap.UID
	for _, u := range data.AllUIDs() {
		if uint32(u) > cur.LastUID {
			uids = append(uids, u)
		}
	}
	slices.Sort(uids)
	if cur.LastUID == 0 && uidNext > 1 && len(uids) == 0 {
		// Nothing recent: start after what is there now.
		return a.advance(ctx, cur, uint32(uidNext)-1)
	}
	for _, uid := range uids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := a.fetchOne(ctx, c, mailPos{UIDValidity: cur.UIDValidity, UID: uint32(uid)}, since, cur.LastUID == 0); err != nil {
			return err
		}
		if err := a.advance(ctx, cur, uint32(uid)); err != nil {
			return err
		}
	}
	if cur.LastUID == 0 && uidNext > 1 {
		return a.advance(ctx, cur, uint32(uidNext)-1)
	}
	return nil
}

// fetchOne reads one message and hands it to handle; too large, or (while
// backfilling) older than the window, it is skipped unread.
func (a *Adapter) fetchOne(ctx context.Context, c *imapclient.Client, pos mailPos, since time.Time, backfill bool) error {
	uid := imap.UID(pos.UID)
	section := &imap.FetchItemBodySection{Peek: true}
	meta, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, RFC822Size: true, InternalDate: true}).Collect()
	if err != nil {
		return fmt.Errorf("email: fetch %d: %w", uid, err)
	}
	if len(meta) == 0 {
		return nil // expunged meanwhile
	}
	if meta[0].RFC822Size > a.cfg.MaxMessageBytes {
		a.log.Warn("email: skipped oversized mail", "uid", uid, "size", meta[0].RFC822Size)
		return nil
	}
	if backfill && !meta[0].InternalDate.IsZero() && meta[0].InternalDate.Before(since) {
		return nil
	}
	msgs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return fmt.Errorf("email: fetch %d: %w", uid, err)
	}
	if len(msgs) == 0 {
		return nil
	}
	return a.handle(ctx, msgs[0].FindBodySection(section), pos)
}

// advance moves the cursor to uid and saves it before the next message is
// read: from here on, a crash re-reads nothing handled.
func (a *Adapter) advance(ctx context.Context, cur *Cursor, uid uint32) error {
	if uid <= cur.LastUID {
		return nil
	}
	next := *cur
	next.LastUID = uid
	if err := a.saveCursor(ctx, next); err != nil {
		return err
	}
	*cur = next
	a.setCursor(*cur)
	return nil
}
