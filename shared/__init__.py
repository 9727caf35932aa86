"""What two or more Interlock services use: event schemas, topics, settings, logging, storage, bus."""
