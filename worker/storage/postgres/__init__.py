"""The PostgreSQL backend (asyncpg), for fleets sharing one database."""
