// A qlessd push receiver in Go, standard library only: net/http, and the Standard
// Webhooks signature check written out with crypto/hmac (a dozen lines, in verify
// below), since no Go library for it comes with the standard library or Debian.
//
// qlessd leases each job of a pushed queue and POSTs it here, signed: the body is the
// job as GET /v1/jobs/{jid} shows it. The answer decides the job: 200 completes it,
// and the JSON body becomes its `result`; a 4xx (other than 408 and 429) fails it at
// once into `push-http-<status>`, with the start of the body as its message; a 5xx
// retries it. So this program does the same greeting job as the worker in ../main.go,
// with no qlessd API calls at all:
//
//	cd examples/go/receiver && QLESSD_PUSH_SECRET=whsec_... go run .
//	curl -X PUT localhost:5858/v1/queues/greetings/push \
//	     -H 'content-type: application/json' -d '{"url": "http://127.0.0.1:8000/"}'
//
// (The PUT answers the secret once; start the receiver with it. qlessd refuses
// loopback URLs unless started with --push-allow-private.)
//
// Settings (environment): QLESSD_PUSH_SECRET (required: the queue's `whsec_...`
// secret), PORT (8000), HOST (127.0.0.1; 0.0.0.0 to take deliveries from other
// machines).
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// A job is at most qlessd's --max-job-size (1 MiB by default), with some room.
const maxBody = 2 << 20

// tolerance is how far webhook-timestamp may be from now, as the Standard Webhooks
// libraries allow: an old delivery replayed later is refused.
const tolerance = 5 * time.Minute

// Job holds the fields of a delivered job this receiver uses.
type Job struct {
	Jid   string         `json:"jid"`
	Klass string         `json:"klass"`
	Data  map[string]any `json:"data"`
}

// Refused is a job this receiver cannot do: answered 422, so it fails at once.
type Refused struct{ Message string }

func (e *Refused) Error() string { return e.Message }

// greet is the work itself: the same greeting as the worker. Its result is the answer.
func greet(job Job) (map[string]any, error) {
	if job.Klass != "Greet" {
		return nil, &Refused{"no such job class here: " + job.Klass}
	}
	name, _ := job.Data["name"].(string)
	if name == "" {
		return nil, &Refused{"no name to greet"}
	}
	result := map[string]any{"greeting": "Hello, " + name + "!"}
	for k, v := range job.Data {
		result[k] = v
	}
	return result, nil
}

// verify checks a delivery as the Standard Webhooks specification says: one of the
// space-separated `v1,<base64>` entries of webhook-signature must be the HMAC-SHA256,
// under the secret's key, of "<webhook-id>.<webhook-timestamp>.<body>", and the
// timestamp must be within tolerance of now.
func verify(key []byte, header http.Header, body []byte) error {
	id, stamp := header.Get("webhook-id"), header.Get("webhook-timestamp")
	signatures := header.Get("webhook-signature")
	if id == "" || stamp == "" || signatures == "" {
		return errors.New("missing webhook headers")
	}
	seconds, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return errors.New("unreadable webhook-timestamp")
	}
	if age := time.Since(time.Unix(seconds, 0)); age > tolerance || age < -tolerance {
		return errors.New("webhook-timestamp too far from now")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + stamp + "."))
	mac.Write(body)
	expected := mac.Sum(nil)
	for _, entry := range strings.Fields(signatures) {
		version, signature, _ := strings.Cut(entry, ",")
		given, err := base64.StdEncoding.DecodeString(signature)
		// hmac.Equal takes the same time wherever the first difference is.
		if version == "v1" && err == nil && hmac.Equal(given, expected) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// receiver answers deliveries signed with key.
func receiver(key []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answer := func(status int, contentType, text string) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			io.WriteString(w, text)
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			answer(http.StatusRequestEntityTooLarge, "text/plain", "too large")
			return
		}
		// Only qlessd knows the secret.
		if err := verify(key, r.Header, body); err != nil {
			fmt.Println("refused an unverified delivery:", err)
			answer(http.StatusUnauthorized, "text/plain", "signature not verified")
			return
		}
		var job Job
		if err := json.Unmarshal(body, &job); err != nil {
			answer(http.StatusBadRequest, "text/plain", "not a job")
			return
		}
		// A delivery may come twice (after a crash, say): webhook-id, the job's id,
		// is the same each time. Greeting twice does no harm.
		result, err := greet(job)
		if err != nil {
			fmt.Printf("failed %s: %s\n", job.Jid, err)
			answer(http.StatusUnprocessableEntity, "text/plain", err.Error())
			return
		}
		encoded, _ := json.Marshal(result)
		fmt.Printf("completed %s: %s\n", job.Jid, result["greeting"])
		answer(http.StatusOK, "application/json", string(encoded))
	}
}

func main() {
	// The secret is `whsec_` and the base64 of its key.
	secret := strings.TrimPrefix(os.Getenv("QLESSD_PUSH_SECRET"), "whsec_")
	key, err := base64.StdEncoding.DecodeString(secret)
	if err != nil || len(key) == 0 {
		fmt.Fprintln(os.Stderr, "QLESSD_PUSH_SECRET must be the queue's whsec_... secret")
		os.Exit(2)
	}
	address := net.JoinHostPort(setting("HOST", "127.0.0.1"), setting("PORT", "8000"))
	listener, err := net.Listen("tcp", address)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on http://%s/\n", address)
	// Each delivery is served on its own goroutine: qlessd sends up to the queue's
	// `concurrency` at once.
	server := &http.Server{Handler: receiver(key), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, server.Serve(listener))
	os.Exit(1)
}

func setting(name, fallback string) string {
	if value, ok := os.LookupEnv(name); ok {
		return value
	}
	return fallback
}
