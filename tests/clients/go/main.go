// A worker written against the Go client that openapi-generator's `go` generator makes
// from openapi/openapi.json on its default settings (tests/process/clients.rs builds
// and runs it). It walks a job's life through the generated API and prints one line
// per step; any surprise exits non-zero.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"

	openapi "github.com/GIT_USER_ID/GIT_REPO_ID"
)

var ctx = context.Background()

func main() {
	cfg := openapi.NewConfiguration()
	cfg.Servers = openapi.ServerConfigurations{{URL: os.Getenv("QLESSD_URL")}}
	api := openapi.NewAPIClient(cfg)
	queue := os.Getenv("QUEUE")
	worker := "go-worker"

	put := func(klass string, depends []string) string {
		request := openapi.NewPutJobRequest(klass)
		request.SetData(map[string]interface{}{"name": "Ada"})
		if depends != nil {
			request.SetDepends(depends)
		}
		answer, _, err := api.QueuesAPI.PutJob(ctx, queue).PutJobRequest(*request).Execute()
		check(err)
		return answer.Jid
	}

	// An empty queue: the long poll waits, then answers an empty list.
	wait := 0.2
	popped, _, err := api.QueuesAPI.PopJobs(ctx, queue).
		PopJobsRequest(openapi.PopJobsRequest{Worker: worker, Wait: &wait}).Execute()
	check(err)
	expect(len(popped), 0, "pop of an empty queue")
	say("waited")

	first := put("Greet", nil)
	say("put", first)
	wait = 1
	popped, _, err = api.QueuesAPI.PopJobs(ctx, queue).
		PopJobsRequest(openapi.PopJobsRequest{Worker: worker, Wait: &wait}).Execute()
	check(err)
	expect(len(popped), 1, "popped jobs")
	job := popped[0]
	expect(job.Jid, first, "popped jid")
	expect(job.State, openapi.RUNNING, "popped state")
	expect(*job.History[0].Q, queue, "put entry's queue")
	expect(*job.History[1].Worker, worker, "popped entry's worker")
	say("popped", first)

	beat, _, err := api.JobsAPI.HeartbeatJob(ctx, first).
		HeartbeatJobRequest(*openapi.NewHeartbeatJobRequest(worker)).Execute()
	check(err)
	got, _, err := api.JobsAPI.GetJob(ctx, first).Execute()
	check(err)
	expect(beat.Expires, got.Expires, "heartbeat's expires and the job's")
	say("heartbeat", first)

	second := put("Greet", nil)
	count := int32(1)
	complete := openapi.NewCompleteJobRequest(worker, queue)
	complete.SetPop(openapi.PopNext{Count: &count})
	done, _, err := api.JobsAPI.CompleteJob(ctx, first).CompleteJobRequest(*complete).Execute()
	check(err)
	expect(done.State, openapi.COMPLETE, "completed state")
	expect(len(done.Popped), 1, "jobs popped by the completion")
	expect(done.Popped[0].Jid, second, "jid popped by the completion")
	say("completed", first, "popped", second)

	group := "Greet-NameError"
	failed, _, err := api.JobsAPI.FailJob(ctx, second).
		FailJobRequest(*openapi.NewFailJobRequest(worker, group, "no name")).Execute()
	check(err)
	expect(failed.State, openapi.FAILED, "failed state")
	say("failed", second)

	groups, _, err := api.FailuresAPI.ListFailureGroups(ctx).Execute()
	check(err)
	expect(groups, map[string]int64{group: 1}, "failure groups")
	page, _, err := api.FailuresAPI.ListFailedJobs(ctx, group).Execute()
	check(err)
	expect(page.Jids, []string{second}, "failed jobs")
	got, _, err = api.JobsAPI.GetJob(ctx, second).Execute()
	check(err)
	last := got.History[len(got.History)-1]
	expect(last.What, "failed", "last history entry")
	expect(*last.Group, group, "failed entry's group")
	say("failures", group)

	moved, _, err := api.FailuresAPI.UnfailJobs(ctx, group).
		UnfailRequest(*openapi.NewUnfailRequest(queue)).Execute()
	check(err)
	expect(moved.Moved, int64(1), "unfailed jobs")
	say("unfailed", second)

	tags, _, err := api.JobsAPI.AddJobTags(ctx, second).
		JobTagsRequest(*openapi.NewJobTagsRequest([]string{"urgent"})).Execute()
	check(err)
	expect(tags.Tags, []string{"urgent"}, "tags after adding")
	tags, _, err = api.JobsAPI.RemoveJobTags(ctx, second).Tag([]string{"urgent"}).Execute()
	check(err)
	expect(tags.Tags, []string{}, "tags after removing")
	say("tagged", second)

	prerequisite := put("Prepare", nil)
	dependent := put("Greet", []string{prerequisite})
	extra := put("Prepare", nil)
	_, err = api.JobsAPI.AddJobDependencies(ctx, dependent).
		AddJobDependenciesRequest(*openapi.NewAddJobDependenciesRequest([]string{extra})).Execute()
	check(err)
	got, _, err = api.JobsAPI.GetJob(ctx, dependent).Execute()
	check(err)
	expect(len(got.Dependencies), 2, "dependencies after adding")
	_, err = api.JobsAPI.RemoveJobDependencies(ctx, dependent).Dependency([]string{extra}).Execute()
	check(err)
	got, _, err = api.JobsAPI.GetJob(ctx, dependent).Execute()
	check(err)
	expect(got.Dependencies, []string{prerequisite}, "dependencies after removing")
	say("dependencies", dependent)

	_, err = api.QueuesAPI.PauseQueue(ctx, queue).Execute()
	check(err)
	counts, _, err := api.QueuesAPI.GetQueue(ctx, queue).Execute()
	check(err)
	expect(counts.Paused, true, "paused")
	_, err = api.QueuesAPI.UnpauseQueue(ctx, queue).Execute()
	check(err)
	counts, _, err = api.QueuesAPI.GetQueue(ctx, queue).Execute()
	check(err)
	expect(counts.Paused, false, "paused after unpausing")
	say("paused", queue)

	_, err = api.JobsAPI.CancelJob(ctx, dependent).Execute()
	check(err)
	_, response, err := api.JobsAPI.GetJob(ctx, dependent).Execute()
	expect(response.StatusCode, 404, "status of a canceled job")
	expect(problem(err).Code, "not_found", "code of a canceled job")
	say("canceled", dependent)

	// The second job waits again (unfailed): a heartbeat is a conflict.
	_, response, err = api.JobsAPI.HeartbeatJob(ctx, second).
		HeartbeatJobRequest(*openapi.NewHeartbeatJobRequest(worker)).Execute()
	expect(response.StatusCode, 409, "status of a heartbeat of a waiting job")
	conflict := problem(err)
	expect(conflict.Code, "conflict", "code of a heartbeat of a waiting job")
	expect(conflict.Status, int32(409), "status in the problem")
	say("conflict", conflict.Code)
	say("done")
}

// The problem an error response carried.
func problem(err error) openapi.Problem {
	var failure *openapi.GenericOpenAPIError
	if !errors.As(err, &failure) {
		fail("expected an error response, got %v", err)
	}
	found, ok := failure.Model().(openapi.Problem)
	if !ok {
		fail("the error carries no problem: %v (%s)", failure.Model(), failure.Body())
	}
	return found
}

func check(err error) {
	if err == nil {
		return
	}
	var failure *openapi.GenericOpenAPIError
	if errors.As(err, &failure) {
		fail("%v: %s", err, failure.Body())
	}
	fail("%v", err)
}

func expect(got, want interface{}, what string) {
	if !reflect.DeepEqual(got, want) {
		fail("%s: got %#v, want %#v", what, got, want)
	}
}

func say(words ...interface{}) {
	fmt.Println(words...)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
