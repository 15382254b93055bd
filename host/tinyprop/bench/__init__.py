"""Where the README's figures come from: `tinyprop bench`, the TTE comparison, the float
baseline."""
