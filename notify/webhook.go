package notify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// DefaultHTTPTimeout bounds one POST, from dial to the answer's last byte
// read; maxAnswer bounds what of an endpoint's answer is read (for the
// error text).
const (
	DefaultHTTPTimeout = 10 * time.Second
	maxAnswer          = 4 << 10
)

type webhook struct {
	url    string
	signer *standardwebhooks.Webhook
	client *http.Client
}

func newWebhook(w mcpconfig.Webhook, key []byte, timeout time.Duration) (*webhook, error) {
	signer, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return nil, err
	}
	return &webhook{url: w.URL, signer: signer, client: &http.Client{
		Timeout: timeout,
		// An endpoint that moves answers 3xx: a failed delivery, never a
		// signed body sent where the config does not say.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

func (w *webhook) timeout() time.Duration { return w.client.Timeout }

// send POSTs the event signed in the Standard Webhooks form: webhook-id
// (the same on every retry), webhook-timestamp (this attempt's), and
// webhook-signature (v1, HMAC-SHA256 of id.timestamp.body).
func (w *webhook) send(ctx context.Context, e store.OutboxEntry) error {
	now := time.Now()
	sig, err := w.signer.Sign(e.ID, now, e.Body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(e.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "taskdeck-notify")
	req.Header.Set("webhook-id", e.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := w.client.Do(req)
	if err != nil {
		// The URL's query may hold a token: the error names the host only.
		return fmt.Errorf("POST %s", mcpconfig.RedactURLs(err.Error()))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	msg := fmt.Sprintf("POST %s: %s", mcpconfig.RedactURL(w.url), resp.Status)
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 {
		msg += " (redirects are not followed; configure the URL it names: " + mcpconfig.RedactURL(loc) + ")"
	} else if len(answer) > 0 {
		msg += ": " + termtext.OneLine(termtext.Line(string(answer)), 200)
	}
	return fmt.Errorf("%s", msg)
}
