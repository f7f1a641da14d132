// A batch with a callback, in Go, standard library only.
//
// It puts three `Thumbnail` jobs in the queue `thumbnails` as one batch, with an
// `on_success` callback: a `ThumbnailsDone` job that qlessd puts in the queue
// `thumbnails-done` once every job of the batch has completed. Then it plays the
// workers itself: it leases the three jobs with a long poll and completes each with a
// small `result`; the last completion puts the callback (in the same script call), so
// it leases that next and prints the summary of the batch qlessd put in its data
// (`data.batch`), completes it and exits with status 0. Run it against a qlessd on
// localhost:
//
//	cd examples/go/batch && go run .
//
// Settings (environment), as for the workers: QLESSD_URL (default
// http://127.0.0.1:5858), POP_WAIT (seconds a long poll waits, 10), QLESSD_TOKEN (sent
// as a bearer token when set).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

var (
	baseURL = setting("QLESSD_URL", "http://127.0.0.1:5858")
	popWait = number("POP_WAIT", 10)
	// A worker name unique to this process: leases belong to it.
	worker = workerName()
	// The timeout must outlast a long poll.
	client = &http.Client{Timeout: time.Duration(popWait+30) * time.Second}
)

// Job holds the fields of a leased job this program uses.
type Job struct {
	Jid   string `json:"jid"`
	Queue string `json:"queue"`
	Data  struct {
		Photo string `json:"photo"`
		// Only in the callback's data: the summary of the batch qlessd put there.
		Batch struct {
			Bid       string `json:"bid"`
			Total     int    `json:"total"`
			Completed int    `json:"completed"`
			Failed    int    `json:"failed"`
		} `json:"batch"`
	} `json:"data"`
}

// die ends the program with a message and status 1.
func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// call makes one API call: body sent as JSON, the answer decoded into out (if not
// nil); an error ends the program.
func call(method, path string, body, out any) {
	encoded, err := json.Marshal(body)
	if err != nil {
		die("%v", err)
	}
	req, err := http.NewRequest(method, baseURL+path, bytes.NewReader(encoded))
	if err != nil {
		die("%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token := os.Getenv("QLESSD_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		die("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var problem struct{ Code, Detail string }
		_ = json.NewDecoder(resp.Body).Decode(&problem)
		die("%s %s: %d %s: %s", method, path, resp.StatusCode, problem.Code, problem.Detail)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			die("%s %s: %v", method, path, err)
		}
	}
}

// lease leases one job of queue, waiting up to popWait seconds for it to come.
func lease(queue string) Job {
	var jobs []Job
	call("POST", "/v1/queues/"+queue+"/pop",
		map[string]any{"worker": worker, "count": 1, "wait": popWait}, &jobs)
	if len(jobs) == 0 { // the job was put before we asked, so it should be there
		die("no job came in %s within %v s", queue, popWait)
	}
	return jobs[0]
}

func main() {
	// The jobs and the batch are written in one call: all of them, or none. The
	// callback's data gets `batch` (the summary) beside its own keys.
	var jobs []map[string]any
	for _, photo := range []string{"beach.jpg", "harbour.jpg", "lighthouse.jpg"} {
		jobs = append(jobs, map[string]any{
			"queue": "thumbnails", "klass": "Thumbnail", "data": map[string]any{"photo": photo},
		})
	}
	var batch struct {
		Bid  string   `json:"bid"`
		Jids []string `json:"jids"`
	}
	call("POST", "/v1/batches", map[string]any{
		"description": "thumbnails of the holiday album",
		"jobs":        jobs,
		"on_success": map[string]any{
			"queue": "thumbnails-done", "klass": "ThumbnailsDone",
			"data": map[string]any{"album": "holidays"},
		},
	}, &batch)
	fmt.Println("batch", batch.Bid)

	// Work the batch's jobs: lease each, "make the thumbnail", complete it with a
	// result (kept beside the job's data, which stays as it was).
	for range batch.Jids {
		job := lease("thumbnails")
		thumbnail := "thumb-" + job.Data.Photo
		call("POST", "/v1/jobs/"+job.Jid+"/complete", map[string]any{
			"worker": worker, "queue": job.Queue,
			"result": map[string]any{"thumbnail": thumbnail},
		}, nil)
		fmt.Println("completed", job.Jid)
	}

	// The last completion put the callback: an ordinary job, put exactly once.
	callback := lease("thumbnails-done")
	summary := callback.Data.Batch
	fmt.Printf("callback %s: %d of %d completed\n",
		callback.Jid, summary.Completed, summary.Total)
	call("POST", "/v1/jobs/"+callback.Jid+"/complete",
		map[string]any{"worker": worker, "queue": callback.Queue}, nil)
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
