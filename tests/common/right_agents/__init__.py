"""Correct agents of other styles than the reference one, each a subclass taking one path the contract
documents as correct and the reference agent does not take: the tests run them through the real engine
and expect PASS (docs/contract.md is the judge of what is correct, not the rules)."""
