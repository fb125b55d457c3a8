"""z3 over a spec: configuration classes and failure conditions, static range checks, a second engine.

`terms` turns spec expressions into z3 terms; `classes` splits elected lanes and parameter
values into classes and states conditions; `static` holds the byte, budget and descriptor checks.
"""
