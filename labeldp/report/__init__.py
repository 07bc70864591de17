"""Tables, figures and scorecards built only from result records."""
