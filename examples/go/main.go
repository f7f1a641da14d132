// A complete qlessd worker in Go, standard library only.
//
// It puts a few jobs, then works: lease jobs with a long poll, heartbeat while working,
// complete or fail each one, and stop gracefully on Ctrl-C or SIGTERM (finishing the
// job in hand, never abandoning a lease). Completing (or failing) a job also leases the
// next one in the same request ("pop"), so a busy worker makes one request per job;
// only when that finds the queue empty does it long-poll. Run it against a qlessd on
// localhost:
//
//	cd examples/go && go run .
//
// A job whose work fails goes to the failure group `<klass>-<reason>`: the work names a
// short reason (`Greet-no-name` for the job without a name), and an unexpected error
// falls into `<klass>-error`. The same rule holds in every example.
//
// Settings (environment): QLESSD_URL (default http://127.0.0.1:5858), QUEUE
// (greetings), PUT_JOBS (jobs to put first, 5), WORK_SECONDS (time a job takes, 2),
// HEARTBEAT_SECONDS (10), POP_WAIT (seconds a long poll waits, 10), QLESSD_TOKEN (sent
// as a bearer token when set), EXIT_WHEN_IDLE (1: once the queue is empty, that is when
// no job came with the last completion and a long poll then returns none either, print
// `idle, exiting` and exit with status 0; unset, work until Ctrl-C or SIGTERM).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

var (
	baseURL  = setting("QLESSD_URL", "http://127.0.0.1:5858")
	queue    = setting("QUEUE", "greetings")
	putJobs  = int(number("PUT_JOBS", 5))
	workTime = time.Duration(number("WORK_SECONDS", 2) * float64(time.Second))
	// Well inside the lease (60 s unless the `heartbeat` option says otherwise).
	heartbeatEvery = time.Duration(number("HEARTBEAT_SECONDS", 10) * float64(time.Second))
	popWait        = number("POP_WAIT", 10)
	exitWhenIdle   = os.Getenv("EXIT_WHEN_IDLE") == "1"
	// A worker name unique to this process: leases belong to it.
	worker = workerName()
	// The timeout must outlast a long poll.
	client = &http.Client{Timeout: time.Duration(popWait+30) * time.Second}
)

// Job holds the fields of a leased job this worker uses.
type Job struct {
	Jid   string         `json:"jid"`
	Klass string         `json:"klass"`
	Queue string         `json:"queue"`
	Data  map[string]any `json:"data"`
}

// APIError is a qlessd problem document: Code is stable, Detail is for humans.
type APIError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

// JobFailed is a failure of the work for a known reason: a short slug ("no-name")
// that names the failure group, <klass>-<reason>.
type JobFailed struct {
	Reason  string
	Message string
}

func (e *JobFailed) Error() string { return e.Message }

// failureGroup is <klass>-<reason> for a *JobFailed, <klass>-error for any other error.
func failureGroup(klass string, err error) string {
	var failed *JobFailed
	if errors.As(err, &failed) {
		return klass + "-" + failed.Reason
	}
	return klass + "-error"
}

// call makes one API call: body (if not nil) sent as JSON, the answer decoded into
// out, errors as *APIError.
func call(method, path string, body, out any) error {
	var payload io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return err
		}
		payload = bytes.NewReader(encoded)
	}
	req, err := http.NewRequest(method, baseURL+path, payload)
	if err != nil {
		return err
	}
	if body != nil { // a write without a body needs no Content-Type
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token := os.Getenv("QLESSD_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		problem := &APIError{Status: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(problem)
		return problem
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func put() error {
	// One name is empty, so that one job fails and shows up under /v1/failures.
	names := []string{"Ada", "Grace", "Linus", "Barbara", ""}
	for i := 0; i < putJobs; i++ {
		var created struct {
			Jid string `json:"jid"`
		}
		job := map[string]any{"klass": "Greet", "data": map[string]any{"name": names[i%len(names)]}, "retries": 2}
		if err := call("POST", "/v1/queues/"+queue+"/jobs", job, &created); err != nil {
			return err
		}
		fmt.Println("put", created.Jid)
	}
	return nil
}

// greet is the work itself. An error fails the job; ctx ends if the lease is lost.
func greet(ctx context.Context, job Job) (map[string]any, error) {
	name, _ := job.Data["name"].(string)
	if name == "" {
		return nil, &JobFailed{Reason: "no-name", Message: "no name to greet"}
	}
	select { // "working"
	case <-time.After(workTime):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	result := map[string]any{"greeting": "Hello, " + name + "!"}
	for k, v := range job.Data {
		result[k] = v
	}
	return result, nil
}

// heartbeat renews the lease every heartbeatEvery until ctx ends, and calls lose
// if the lease is lost.
func heartbeat(ctx context.Context, jid string, lose context.CancelFunc) {
	ticker := time.NewTicker(heartbeatEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		err := call("POST", "/v1/jobs/"+jid+"/heartbeat", map[string]any{"worker": worker}, nil)
		var problem *APIError
		switch {
		case err == nil:
			fmt.Println("heartbeat", jid)
		case errors.As(err, &problem) && (problem.Code == "lock_lost" || problem.Code == "conflict" || problem.Code == "not_found"):
			// Another worker has it now (or it was canceled): stop working on it.
			fmt.Println("lost", jid, err)
			lose()
			return
		default:
			fmt.Println("heartbeat failed, will retry:", err)
		}
	}
}

// Ended is the answer of a complete or fail: with "pop", the jobs leased next.
type Ended struct {
	Popped []Job `json:"popped"`
}

// work works one job and returns the jobs leased with its completion (or failure);
// with wantNext false (stopping, or jobs still in hand) it leases none.
func work(job Job, wantNext bool) []Job {
	// The job's own context: it is not the signal's, so a stop lets the work finish.
	lease, lose := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { heartbeat(lease, job.Jid, lose); close(done) }()
	result, err := greet(lease, job)
	lost := lease.Err() != nil
	lose() // stops the heartbeat
	<-done
	var ended Ended
	switch {
	case lost:
		return nil // the job is someone else's now
	case err != nil:
		// Any failure of the work goes to a failure group.
		group := failureGroup(job.Klass, err)
		fail := map[string]any{"worker": worker, "group": group, "message": err.Error()}
		if wantNext {
			fail["pop"] = map[string]any{"count": 1}
		}
		if err := call("POST", "/v1/jobs/"+job.Jid+"/fail", fail, &ended); err != nil {
			fmt.Println("fail failed:", err)
			return nil
		}
		fmt.Println("failed", job.Jid, "into "+group+":", err)
	default:
		complete := map[string]any{"worker": worker, "queue": job.Queue, "data": result}
		if wantNext {
			// Lease the next job in the same request.
			complete["pop"] = map[string]any{"count": 1}
		}
		if err := call("POST", "/v1/jobs/"+job.Jid+"/complete", complete, &ended); err != nil {
			fmt.Println("complete failed:", err)
			return nil
		}
		fmt.Println("completed", job.Jid)
	}
	return ended.Popped
}

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	stop, stopNow := context.WithCancel(context.Background())
	go func() {
		fmt.Println("stopping after the job in hand:", <-signals)
		stopNow()
	}()

	if err := put(); err != nil {
		fmt.Fprintln(os.Stderr, "put failed:", err)
		os.Exit(1)
	}
	fmt.Println("worker", worker, "serving queue", queue)
	var jobs []Job
	for len(jobs) > 0 || stop.Err() == nil {
		if len(jobs) == 0 {
			// Long poll: returns as soon as a job is available, or [] after popWait.
			pop := map[string]any{"worker": worker, "count": 1, "wait": popWait}
			if err := call("POST", "/v1/queues/"+queue+"/pop", pop, &jobs); err != nil {
				fmt.Println("pop failed, retrying in 1 s:", err)
				time.Sleep(time.Second)
				continue
			}
			if len(jobs) == 0 && exitWhenIdle {
				// No job came with the last completion, nor in a whole long poll.
				fmt.Println("idle, exiting")
				return
			}
			continue
		}
		// A job leased before the signal is still finished.
		job := jobs[0]
		jobs = jobs[1:]
		jobs = append(jobs, work(job, len(jobs) == 0 && stop.Err() == nil)...)
	}
	fmt.Println("stopped")
}

func setting(name, fallback string) string {
	if value, ok := os.LookupEnv(name); ok {
		return value
	}
	return fallback
}

func number(name string, fallback float64) float64 {
	value, err := strconv.ParseFloat(setting(name, ""), 64)
	if err != nil {
		return fallback
	}
	return value
}

func workerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
