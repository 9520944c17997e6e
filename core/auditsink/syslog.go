package auditsink

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/leodido/go-syslog/v4/rfc5424"

	"github.com/opsgate/opsgate/approvals"
)

// Syslog: RFC 5424 messages, built and checked by leodido/go-syslog's
// rfc5424 builder (the standard library's log/syslog writes the older
// BSD format, RFC 3164, which has no structured header, year or time
// zone). Over UDP (RFC 5426) one message per datagram; over TCP and unix
// stream sockets octet-counted frames (RFC 6587, "<length> <message>");
// over a unix datagram socket (/dev/log) one per datagram.
//
// The header: facility 13 ("log audit"), severity notice (warning for
// refusals and denials), the host name, app-name "opsgate", the process
// id, MSGID the entry's kind; no structured data; MSG the entry as JSON,
// the API's form, with its seq and chain hash so a receiver can drop
// duplicates and verify the chain.

const (
	facilityLogAudit = 13
	severityWarning  = 4
	severityNotice   = 5
	// maxDatagram bounds a message sent as one datagram (UDP's payload
	// limit).
	maxDatagram = 65507
)

type syslogDest struct {
	network, address string
	host, pid        string
	conn             net.Conn
	datagram         bool
	timeout          time.Duration
}

func newSyslog(addr string) (*syslogDest, error) {
	network, address, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "-"
	}
	return &syslogDest{network: network, address: address, host: host, pid: strconv.Itoa(os.Getpid()), timeout: 10 * time.Second}, nil
}

// Format renders one entry as an RFC 5424 message.
func Format(e approvals.AuditEntry, host, pid string) (string, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	sev := uint8(severityNotice)
	switch e.Kind {
	case approvals.AuditApprovalRefused, approvals.AuditRequestRefused, approvals.AuditPolicyDenied, approvals.AuditConfigRefused,
		approvals.AuditRunInterrupted:
		sev = severityWarning
	}
	m := &rfc5424.SyslogMessage{}
	m.SetPriority(facilityLogAudit*8 + sev)
	m.SetVersion(1)
	m.SetTimestamp(e.At.UTC().Format(time.RFC3339Nano))
	m.SetHostname(host)
	m.SetAppname("opsgate")
	m.SetProcID(pid)
	if k := string(e.Kind); k != "" && len(k) <= 32 {
		m.SetMsgID(k)
	}
	m.SetMessage(string(body))
	s, err := m.String()
	if err != nil {
		return "", fmt.Errorf("audit sink: syslog: entry %d: %w", e.Seq, err)
	}
	return s, nil
}

func (d *syslogDest) dial(ctx context.Context) error {
	if d.conn != nil {
		return nil
	}
	var dl net.Dialer
	dl.Timeout = d.timeout
	if d.network == "unix" {
		// /dev/log is a datagram socket on most systems; a stream socket
		// otherwise (as log/syslog tries them).
		if c, err := dl.DialContext(ctx, "unixgram", d.address); err == nil {
			d.conn, d.datagram = c, true
			return nil
		}
	}
	c, err := dl.DialContext(ctx, d.network, d.address)
	if err != nil {
		return fmt.Errorf("audit sink: syslog: dial %s %s: %w", d.network, d.address, err)
	}
	d.conn, d.datagram = c, d.network == "udp"
	return nil
}

// Deliver writes entries in order; it returns how many the transport
// accepted. Syslog has no acknowledgement: accepted means sent (UDP) or
// written to the connection (TCP, unix).
func (d *syslogDest) Deliver(ctx context.Context, entries []approvals.AuditEntry) (int, error) {
	for i, e := range entries {
		msg, err := Format(e, d.host, d.pid)
		if err != nil {
			return i, &PermanentError{Err: err}
		}
		if err := d.dial(ctx); err != nil {
			return i, err
		}
		frame := []byte(msg)
		if d.datagram {
			if len(frame) > maxDatagram {
				return i, &PermanentError{Err: fmt.Errorf("audit sink: syslog: entry %d is %d bytes, more than a datagram holds", e.Seq, len(frame))}
			}
		} else {
			frame = []byte(strconv.Itoa(len(msg)) + " " + msg)
		}
		_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
		if _, err := d.conn.Write(frame); err != nil {
			d.Close()
			return i, fmt.Errorf("audit sink: syslog: write to %s: %w", d.address, err)
		}
	}
	return len(entries), nil
}

func (d *syslogDest) Close() error {
	if d.conn == nil {
		return nil
	}
	err := d.conn.Close()
	d.conn = nil
	return err
}
