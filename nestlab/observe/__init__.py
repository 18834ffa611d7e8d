"""Looking at a running lab: its picture (graph exports and a live page), packet capture, and its event stream."""
