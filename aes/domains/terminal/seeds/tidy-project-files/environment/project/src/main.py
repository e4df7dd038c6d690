print('orbit')
