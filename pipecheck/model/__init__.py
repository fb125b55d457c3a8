"""The machine: thread-class programs (ir, threads), what a kernel declares (kernel, layout), the mbarrier and
async rules (semantics), and the transition system over states (system, state) with the findings a step raises.
"""
