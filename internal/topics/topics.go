// Package topics makes ready the topics an App uses before it joins its
// group: it waits for the brokers and the input topics, creates the
// internal topics that are missing (changelogs compacted; repartition
// topics that keep their records, which internal/purge deletes once
// committed) and the sink topics when asked, and checks those that exist.
// Prepare runs on the caller's goroutine (App.Run, before the membership
// starts) and owns nothing after it returns.
package topics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/baton-streams/baton/internal/errs"
	"github.com/baton-streams/baton/topology"
)

// Partition names one partition of one topic.
type Partition struct {
	Topic string
	Part  int32
}

// Need is what Prepare makes ready.
type Need struct {
	Brokers       []string // the seed brokers, named in errors
	Subtopologies []topology.Subtopology
	Sources       []string // the input topics (internal ones included)
	// ReplicationFactor and MinInSyncReplicas of the topics created; 0
	// takes the default for the cluster's size (Replication).
	ReplicationFactor, MinInSyncReplicas int
	// SinkConfigs, when not nil, creates missing sink topics with these
	// configs (min.insync.replicas added unless set).
	SinkConfigs map[string]*string
}

// Replication returns the replication factor and min.insync.replicas of
// the topics baton creates on a cluster of brokers: rf and isr when set
// (not 0), otherwise rf min(3, brokers) and isr min(2, rf-1), at least 1.
func Replication(rf, isr, brokers int) (int, int, error) {
	if rf == 0 {
		rf = max(1, min(3, brokers))
	}
	if isr == 0 {
		isr = max(1, min(2, rf-1))
	}
	if isr > rf { // only with the default factor: options check set ones
		return 0, 0, fmt.Errorf("%w: min in-sync replicas: %d exceeds the replication factor %d (the default on a cluster of %d brokers); set the replication factor too", errs.ErrConfig, isr, rf, brokers)
	}
	return rf, isr, nil
}

func changelogConfigs(isr int) map[string]*string {
	return map[string]*string{
		"cleanup.policy":      kadm.StringPtr("compact"),
		"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr)),
	}
}

func repartitionConfigs(isr int) map[string]*string {
	return map[string]*string{
		"cleanup.policy":      kadm.StringPtr("delete"),
		"retention.ms":        kadm.StringPtr("-1"),
		"retention.bytes":     kadm.StringPtr("-1"),
		"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr)),
	}
}

// sinkConfigs are the configs of an output topic baton creates: the
// caller's, with min.insync.replicas added unless the caller set it.
func sinkConfigs(user map[string]*string, isr int) map[string]*string {
	out := map[string]*string{"min.insync.replicas": kadm.StringPtr(strconv.Itoa(isr))}
	for k, v := range user {
		out[k] = v
	}
	return out
}

// preparer is one Prepare's state.
type preparer struct {
	adm      *kadm.Client
	need     Need
	log      *slog.Logger
	brokers  int // in the cluster
	rf, isr  int
	details  kadm.TopicDetails
	internal map[string]bool
	// existing internal topics whose cleanup policy is checked: topic ->
	// "changelog" or "repartition".
	existing map[string]string
}

// Prepare waits for the brokers (10 s), learns partition counts and
// creates internal topics that are missing: repartition topics with the
// partitions of the subtopology that writes them, changelogs with the
// partitions of their subtopology's sources. Internal topics that exist
// already must have those partition counts and a cleanup policy baton can
// work with (changelogs compacted, repartition topics delete); otherwise it
// returns an error naming the topic. It returns the partition count of
// every topic the cluster listed.
func Prepare(ctx context.Context, adm *kadm.Client, need Need, log *slog.Logger) (map[string]int32, error) {
	p := &preparer{adm: adm, need: need, log: log, internal: map[string]bool{}, existing: map[string]string{}}
	meta, err := p.metadata(ctx)
	if err != nil {
		return nil, err
	}
	p.details, p.brokers = meta.Topics, len(meta.Brokers)
	if p.rf, p.isr, err = Replication(need.ReplicationFactor, need.MinInSyncReplicas, p.brokers); err != nil {
		return nil, err
	}
	for _, s := range need.Subtopologies {
		for _, t := range s.Repartition {
			p.internal[t] = true
		}
		for _, st := range s.Stores {
			if !st.Source { // a table's topic is the user's
				p.internal[st.Changelog] = true
			}
		}
	}
	// A replication factor the cluster cannot give is reported now, not
	// after waiting for the input topics, if an internal topic is missing.
	for t := range p.internal {
		if d, ok := p.details[t]; !ok || d.Err != nil {
			if err := p.canCreate(t); err != nil {
				return nil, err
			}
		}
	}
	if err := p.waitInputs(ctx); err != nil {
		return nil, err
	}
	// Waiting for the input may have taken longer than the brokers' 10 s:
	// creating and checking the internal topics gets its own time.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, s := range need.Subtopologies {
		if err := p.subtopology(ctx, cctx, s); err != nil {
			return nil, err
		}
	}
	if err := p.checkPolicies(cctx); err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for t, d := range p.details {
		out[t] = int32(len(d.Partitions))
	}
	return out, nil
}

// metadata waits up to 10 s for the brokers to answer.
func (p *preparer) metadata(ctx context.Context) (kadm.Metadata, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var last error
	for {
		meta, err := p.adm.Metadata(cctx)
		if err == nil {
			return meta, nil
		}
		// Wrong credentials do not get better by waiting.
		if errors.Is(err, kerr.SaslAuthenticationFailed) {
			return meta, fmt.Errorf("%w: %s: %w", errs.ErrAuth, strings.Join(p.need.Brokers, ","), err)
		}
		// The attempt the deadline cut short says less than the one before.
		if last == nil || cctx.Err() == nil {
			last = err
		}
		select {
		case <-cctx.Done():
			return meta, fmt.Errorf("%w: %s: %v", errs.ErrBrokers, strings.Join(p.need.Brokers, ","), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *preparer) canCreate(topic string) error {
	if p.rf > p.brokers {
		return fmt.Errorf("%w: replication factor: %d exceeds the %d brokers of the cluster; topic %s cannot be created", errs.ErrConfig, p.rf, p.brokers, topic)
	}
	return nil
}

// waitInputs waits for the input topics: they must exist before their
// partition counts size the internal topics (a producer may create them).
func (p *preparer) waitInputs(ctx context.Context) error {
	for _, t := range p.need.Sources {
		if p.internal[t] {
			continue
		}
		logged := false
		for p.parts(t) == 0 {
			if !logged {
				p.log.Info("waiting for input topic to exist", "topic", t)
				logged = true
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
			more, err := p.adm.ListTopics(lctx, t)
			lcancel()
			if err == nil {
				for k, v := range more {
					p.details[k] = v
				}
			}
		}
	}
	return nil
}

// parts is topic's partition count, 0 if the cluster did not list it.
func (p *preparer) parts(topic string) int32 {
	if d, ok := p.details[topic]; ok && d.Err == nil {
		return int32(len(d.Partitions))
	}
	return 0
}

// subtopology makes ready the changelogs, repartition topics and (when
// asked) sinks of s. Subtopologies go in id order: a repartition topic is
// written by an earlier subtopology than the one reading it.
func (p *preparer) subtopology(ctx, cctx context.Context, s topology.Subtopology) error {
	n := int32(0)
	counts := map[string]int32{}
	for _, src := range s.Sources {
		if c := p.parts(src); c > 0 {
			counts[src] = c
			if n == 0 || c < n {
				n = c
			}
		}
	}
	if len(counts) == len(s.Sources) {
		if _, err := s.CheckPartitions(counts); err != nil {
			return fmt.Errorf("baton: %w: a subtopology's topics are joined or share its stores, so each needs the same number of partitions", err)
		}
	}
	if n == 0 {
		p.log.Warn("input topic missing or empty; the subtopology waits for it", "subtopology", s.ID, "topics", s.Sources)
		return nil
	}
	for _, st := range s.Stores {
		if st.Source {
			continue
		}
		if err := p.internalTopic(ctx, cctx, "changelog", st.Changelog, n, changelogConfigs(p.isr)); err != nil {
			return err
		}
	}
	for _, sink := range s.Sinks {
		var err error
		switch {
		case slices.Contains(s.Repartition, sink):
			err = p.internalTopic(ctx, cctx, "repartition", sink, n, repartitionConfigs(p.isr))
		case p.need.SinkConfigs != nil && p.parts(sink) == 0:
			_, err = p.create(cctx, sink, n, sinkConfigs(p.need.SinkConfigs, p.isr))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// internalTopic creates topic with n partitions if it is missing, or
// checks that it has n (and notes it for checkPolicies).
func (p *preparer) internalTopic(ctx, cctx context.Context, kind, topic string, n int32, configs map[string]*string) error {
	have := p.parts(topic)
	if have == 0 {
		created, err := p.create(cctx, topic, n, configs)
		if err != nil || created {
			return err
		}
		d, err := p.waitTopic(ctx, topic)
		if err != nil {
			return err
		}
		p.details[topic] = d
		have = int32(len(d.Partitions))
	}
	if have != n {
		return fmt.Errorf("baton: %s topic %s has %d partitions, the subtopology has %d tasks: delete it or use a new app id", kind, topic, have, n)
	}
	p.existing[topic] = kind
	return nil
}

// create creates topic and reports whether it did: false if it exists
// already though the metadata did not list it yet (just created by
// someone else, or not yet known to the broker that answered).
func (p *preparer) create(ctx context.Context, topic string, n int32, configs map[string]*string) (bool, error) {
	if err := p.canCreate(topic); err != nil {
		return false, err
	}
	resp, err := p.adm.CreateTopic(ctx, n, int16(p.rf), configs, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("baton: creating topic %s (%d partitions, replication factor %d): %w", topic, n, p.rf, err)
	}
	p.log.Info("created topic", "topic", topic, "partitions", n, "replication_factor", p.rf, "min_insync_replicas", p.isr)
	d := kadm.TopicDetail{Topic: topic, Partitions: make(kadm.PartitionDetails, n)}
	for part := range n {
		d.Partitions[part] = kadm.PartitionDetail{Topic: topic, Partition: part}
	}
	p.details[topic] = d
	return true, nil
}

// waitTopic returns the metadata of a topic that exists, waiting (10 s)
// until the brokers list it.
func (p *preparer) waitTopic(ctx context.Context, topic string) (kadm.TopicDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		ds, err := p.adm.ListTopics(ctx, topic)
		if d, ok := ds[topic]; err == nil && ok && d.Err == nil && len(d.Partitions) > 0 {
			return d, nil
		}
		if err == nil {
			err = ds[topic].Err
		}
		select {
		case <-ctx.Done():
			return kadm.TopicDetail{}, fmt.Errorf("baton: topic %s exists but its metadata is not available: %v", topic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkPolicies checks the cleanup policy of internal topics that existed
// before this start: a changelog must be compacted (a deleting changelog
// loses state), a repartition topic must not be (compaction drops records
// not yet processed).
func (p *preparer) checkPolicies(ctx context.Context) error {
	existing := p.existing
	if len(existing) == 0 {
		return nil
	}
	topics := make([]string, 0, len(existing))
	for t := range existing {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	// A broker that has not heard of a topic just created yet answers
	// UnknownTopicOrPartition: ask again for a while.
	var rcs kadm.ResourceConfigs
	var err error
	for {
		rcs, err = p.adm.DescribeTopicConfigs(ctx, topics...)
		unknown := false
		for _, rc := range rcs {
			unknown = unknown || errors.Is(rc.Err, kerr.UnknownTopicOrPartition)
		}
		if err != nil || !unknown {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("baton: describing the configs of topics %s: %w", strings.Join(topics, ","), err)
	}
	for _, rc := range rcs {
		kind, ok := existing[rc.Name]
		if !ok {
			continue
		}
		if rc.Err != nil {
			return fmt.Errorf("baton: describing the configs of %s topic %s: %w", kind, rc.Name, rc.Err)
		}
		policy := "delete" // Kafka's default
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		var set []string
		for _, v := range strings.Split(policy, ",") {
			if v = strings.TrimSpace(v); v != "" {
				set = append(set, v)
			}
		}
		switch {
		case kind == "changelog" && !slices.Contains(set, "compact"):
			return fmt.Errorf("baton: changelog topic %s has cleanup.policy=%s, want compact: state would be lost to retention; set cleanup.policy=compact or use a new app id", rc.Name, policy)
		case kind == "repartition" && !slices.Equal(set, []string{"delete"}):
			return fmt.Errorf("baton: repartition topic %s has cleanup.policy=%s, want delete: compaction drops records not yet processed; set cleanup.policy=delete or use a new app id", rc.Name, policy)
		}
	}
	return nil
}
