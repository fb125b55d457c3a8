"""The PTX front end (issue: check the compiled kernel): it will read the PTX that nvcc, the CuTe DSL, Triton or
TileLang emit, evaluate what each thread computes, and lower it to the same thread-class programs as lang/.
"""
