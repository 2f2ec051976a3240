"""autoloader.tuning"""
