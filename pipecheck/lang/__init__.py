"""The .pipe front end: parse (lark grammar in grammars/pipe.lark), the syntax tree, checking, and lowering
role bodies to thread-class programs (model.ir, model.threads).
"""
