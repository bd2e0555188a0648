"""How the running totals are kept between batches."""
