"""What two or more Interlock services use.

Event schemas, topics, settings, logging, storage and the bus.
"""
