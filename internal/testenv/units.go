package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ExplainMessages are messages explain's text is checked on: the README's, the
// issue's, and one of each family explain's own tests paste (the corpus logs are added where
// ../shared/corpus is present).
var ExplainMessages = []string{
	"torch.OutOfMemoryError: ... Process 20629 has 54.00 GiB ...",
	"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free. Process 20629 has 77.88 GiB memory in use.",
	"RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875",
	"(EngineCore_DP0 pid=253) ValueError: Free memory on device cuda:1 (85.92/121.69 GiB) on startup is less than desired\n" +
		"(EngineCore_DP0 pid=253) GPU memory utilization (0.92, 111.95 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n",
	"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 876.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 251.06 MiB is free. " +
		"Process 2612630 has 458.00 MiB memory in use. Process 12345 has 54.00 GiB memory in use. Including non-PyTorch memory, this process has 22.98 GiB memory in use. " +
		"Of the allocated memory 22.65 GiB is allocated by PyTorch, and 77.68 MiB is reserved by PyTorch but unallocated.",
	"RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 3; 15.78 GiB total capacity; 14.56 GiB already allocated; " +
		"3.12 MiB free; 14.70 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb",
}

// ExplainCorpus is ExplainMessages and the error logs of the corpus (root/../shared/corpus),
// when present.
func ExplainCorpus(t *testing.T, root string) []string {
	t.Helper()
	msgs := append([]string(nil), ExplainMessages...)
	for _, p := range []string{"sglang_*", "vllm_*", "pytorch_oom_*", "nccl_*", "dataloader_*"} {
		files, _ := filepath.Glob(filepath.Join(root, "..", "shared", "corpus", p))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, string(b))
		}
	}
	return msgs
}

// unitWord is a word that reads as one with the number before it; numberEnd a word ending
// in a number. Defined here again, apart from the wrapper's own list, so the test does not
// grade the wrapper by its own rules.
var (
	unitWord  = regexp.MustCompile(`^(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|bytes|%|ms|s|×)[.,;:)\]]*$`)
	numberEnd = regexp.MustCompile(`[0-9]$`)
)

// PartedUnits returns each place in text where a line ends in a number (or ×) and the next
// line starts with its unit (or ×): a number parted from its unit.
func PartedUnits(text string) []string {
	var bad []string
	lines := strings.Split(text, "\n")
	for i := 1; i < len(lines); i++ {
		prev, next := strings.Fields(lines[i-1]), strings.Fields(lines[i])
		if len(prev) == 0 || len(next) == 0 {
			continue
		}
		last, first := prev[len(prev)-1], next[0]
		if (numberEnd.MatchString(last) && unitWord.MatchString(first)) || last == "×" || first == "×" {
			bad = append(bad, lines[i-1]+" / "+lines[i])
		}
	}
	return bad
}
