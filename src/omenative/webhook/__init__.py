"""The admission webhook (validating and defaulting) served by the controller process."""
