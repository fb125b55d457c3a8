"""What every stage shares: source spans and diagnostics with their codes, English for messages, the version.
"""
