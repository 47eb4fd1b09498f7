package main

import "hash"

// Kafka's default partitioner (the Java client's BuiltInPartitioner and
// Utils.murmur2) puts a keyed record in partition
//
//	toPositive(murmur2(key)) % numPartitions,  toPositive(x) = x & 0x7fffffff
//
// sarama's default hash partitioner is FNV-1a, and goka uses FNV-1a too
// (goka.DefaultHasher) both for producing and for finding a key's partition.
// murmur2Hasher makes goka and sarama agree with Kafka: its Sum32 is already
// toPositive(murmur2(key)), so that sarama's NewCustomHashPartitioner
// (int32(sum) % n, negated when negative) and goka's Processor.hash
// (abs(int32(sum)) % n) both compute exactly Kafka's partition.

const (
	murmur2Seed = 0x9747b28c
	murmur2M    = 0x5bd1e995
	murmur2R    = 24
)

// murmur2 is the 32-bit MurmurHash2 variant of Kafka's Utils.murmur2,
// returned as the unsigned bits of the Java int.
func murmur2(data []byte) uint32 {
	length := len(data)
	h := uint32(murmur2Seed) ^ uint32(length)
	n4 := length / 4
	for i := 0; i < n4; i++ {
		o := i * 4
		k := uint32(data[o]) | uint32(data[o+1])<<8 | uint32(data[o+2])<<16 | uint32(data[o+3])<<24
		k *= murmur2M
		k ^= k >> murmur2R
		k *= murmur2M
		h *= murmur2M
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= murmur2M
	}
	h ^= h >> 13
	h *= murmur2M
	h ^= h >> 15
	return h
}

// kafkaPartition is the partition Kafka's default partitioner picks for key.
func kafkaPartition(key []byte, numPartitions int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % numPartitions
}

// murmur2Hasher is a hash.Hash32 whose Sum32 is toPositive(murmur2(bytes
// written)). murmur2 is not a streaming hash, so the bytes are buffered.
type murmur2Hasher struct{ buf []byte }

func newMurmur2Hasher() hash.Hash32 { return &murmur2Hasher{} }

func (h *murmur2Hasher) Write(p []byte) (int, error) {
	h.buf = append(h.buf, p...)
	return len(p), nil
}

func (h *murmur2Hasher) Sum32() uint32 { return murmur2(h.buf) & 0x7fffffff }

func (h *murmur2Hasher) Sum(b []byte) []byte {
	s := h.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

func (h *murmur2Hasher) Reset()         { h.buf = h.buf[:0] }
func (h *murmur2Hasher) Size() int      { return 4 }
func (h *murmur2Hasher) BlockSize() int { return 4 }
