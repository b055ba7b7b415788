package diagnose

import "fmt"

// Words of Kubernetes pods: a pod as people name it, and the reasons and findings about pods.

// podName is a pod for people: "ml/train-0, container main (Job train)"; a pod the API no
// longer lists is named by its UID.
func podName(p *PodFacts) string {
	if p.Gone || p.Name == "" {
		return "pod UID " + kname(p.UID)
	}
	s := kname(p.Namespace) + "/" + kname(p.Name)
	if p.Container != "" {
		s += ", container " + kname(p.Container)
	}
	if p.OwnerKind != "" {
		s += " (" + kname(p.OwnerKind) + " " + kname(p.OwnerName) + ")"
	}
	return s
}

// kname is a Kubernetes name, UID, kind or phase as words say it: as it is when it is one the
// API could have made (letters, digits, '.', '-', '_'), else shell-quoted with control bytes
// escaped, so that a name from a capture file can start no line and forge no word.
func kname(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return shellQuote(s)
		}
	}
	if s == "" {
		return "''"
	}
	return s
}

// podReasonWords says a pod reason for people.
func podReasonWords(r Reason) string {
	switch r.Code {
	case ReasonPodGone:
		return fmt.Sprintf("its Kubernetes pod (UID %s) no longer exists: the API lists no such pod on node %s, so nothing will stop its containers", kname(r.Pod.UID), kname(r.Node))
	case ReasonPodEnded:
		return fmt.Sprintf("its Kubernetes pod %s has ended (phase %s, pod UID %s), yet the process still runs", podName(r.Pod), kname(r.State), kname(r.Pod.UID))
	case ReasonPodTerminating:
		return fmt.Sprintf("its Kubernetes pod %s (UID %s) was deleted and its grace period ended %s ago, yet the process still runs", podName(r.Pod), kname(r.Pod.UID), FormatAge(r.Age))
	}
	return fmt.Sprintf("its Kubernetes pod %s was not allocated %s on node %s by the kubelet, yet its PID %d holds memory there", podName(r.Pod), FormatGPUs(r.GPUs), kname(r.Node), r.PID)
}

// podLine is the evidence line naming a process's pod.
func podLine(p *PodFacts) string {
	if p.Gone && p.StartedDuringProbe {
		return "Kubernetes pod: UID " + kname(p.UID) + " (not in the API's listings, but the process started while the probe ran: its pod may have been created and deleted while the probe looked; look again)"
	}
	if p.Gone && p.Static {
		return "Kubernetes pod: UID " + kname(p.UID) + " (a static pod's, from a manifest on the node: the API lists it as a mirror pod under a UID of its own)"
	}
	if p.Gone {
		return "Kubernetes pod: UID " + kname(p.UID) + " (no longer in the API)"
	}
	line := "Kubernetes pod: " + podName(p) + ", UID " + kname(p.UID)
	if p.Phase != "" {
		line += ", " + kname(p.Phase)
	}
	if p.DeleteBy != nil {
		line += ", being deleted (grace period until " + fmtTime(*p.DeleteBy) + ")"
	}
	if p.GoneDuringProbe {
		line += ", deleted while the probe ran: what the probe saw may have been its containers stopping; look again"
	}
	return line
}

// podOutsideWords composes gpu-outside-allocation's words for a running pod.
func podOutsideWords(f *Finding) {
	p, r := f.named(f.PIDs[0]), f.Reasons[0]
	f.Title = fmt.Sprintf("Kubernetes pod %s uses %s, which the kubelet did not allocate to it: PID %d (%s)", podName(r.Pod), FormatGPUs(r.GPUs), p.PID, p.Command)
	f.Explanation = fmt.Sprintf("%s. The pod is running: this is not a leftover but work outside its allocation, which takes memory and compute from the pods the kubelet gives %s. "+
		"A container sees GPUs it was not given when it runs privileged, mounts the devices itself or sets NVIDIA_VISIBLE_DEVICES; ask its owner to request the GPUs it uses (resources.limits nvidia.com/gpu).",
		capitalize(podReasonWords(r)), plural(len(r.GPUs), "that GPU", "those GPUs"))
	outsideEvidence(f, p, r, "the pod")
}
